"""``promptgym``: train from TOML configs; follow runs.

    promptgym train --config examples/configs/arithmetic_fewshot.toml --yes
    promptgym train --resume RUN_ID
    promptgym submit --config run.toml --address http://127.0.0.1:8265
    promptgym runs list | show ID | watch ID | stop ID
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from promptgym.cli.backend import BackendError, BackendSpec, parse_backend
from promptgym.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, fail, secret_env_names, secret_masker
from promptgym.cli.config import ConfigError, JobConfig, load_config, resolved_dict, validate_config
from promptgym.cli.runs import RunFolder, default_runs_dir
from promptgym.cli.runs_commands import runs_app
from promptgym.cli.secrets import Masker
from promptgym.cli.submit import submit

app = typer.Typer(help="Train LM programs' prompts from TOML configs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
app.add_typer(runs_app, name="runs")
app.command("submit")(submit)


def discover_config() -> list[str]:
    found = sorted(p for p in Path.cwd().glob("*.toml") if p.name != "pyproject.toml")
    if not found:
        fail("no --config given and no *.toml file in the current folder")
    if len(found) == 1:
        console.print(f"using config {found[0].name}")
        return [str(found[0])]
    for number, path in enumerate(found, 1):
        console.print(f"  {number}. {path.name}")
    choice = typer.prompt("Which config", type=int, default=1)
    if not 1 <= choice <= len(found):
        fail(f"choose a number between 1 and {len(found)}")
    return [str(found[choice - 1])]


def save_resolved_config(run: RunFolder, config: JobConfig, masker: Masker) -> None:
    import tomli_w

    run.write_text("config.toml", masker.mask(tomli_w.dumps(resolved_dict(config))))


def load_run_config(run: RunFolder) -> JobConfig:
    import tomllib

    return validate_config(tomllib.loads((run.path / "config.toml").read_text(encoding="utf-8")), str(run.path / "config.toml"))


def run_in_process(run: RunFolder, config: JobConfig, masker: Masker, stream_format: str, resume: bool,
                   job: Any = None, backend: BackendSpec | None = None) -> None:
    from promptgym.cli.render import make_renderer
    from promptgym.cli.runner import execute

    renderer = make_renderer(stream_format, console)
    try:
        status = asyncio.run(execute(run, config, masker, [renderer], resume=resume, job=job, backend=backend))
    except KeyboardInterrupt:
        renderer.close()
        console.print(f"interrupted; checkpoint saved. Continue with: promptgym train --resume {run.id}")
        raise typer.Exit(EXIT_INTERRUPTED)
    except ConfigError as error:
        renderer.close()
        fail(masker.mask(str(error)))
    except Exception as error:  # noqa: BLE001 - the run folder has the details; say it plainly
        renderer.close()
        fail(masker.mask(f"run {run.id} failed: {type(error).__name__}: {error}"), EXIT_FAILED)
    renderer.close()
    console.print(f"done: {run.path / 'summary.md'}")
    final = status.get("final") or {}
    interval = ((final.get("statistics") or {}).get("intervals") or {}).get("reward")
    shown = f"{final.get('reward')}" + (f", 95% CI [{interval['low']:.3f}, {interval['high']:.3f}]" if interval else "")
    console.print(f"best program: {run.path / 'best_program.json'} (final reward {shown})")


def start_detached(run: RunFolder, runs_dir: Path, backend: BackendSpec) -> None:
    command = [sys.executable, "-m", "promptgym.cli.main", "worker", run.id, "--runs-dir", str(runs_dir),
               *backend.arguments()]
    with (run.path / "worker.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, cwd=os.getcwd())
    run.update_status(pid=process.pid, status="starting")
    console.print(f"started run {run.id} (pid {process.pid})")
    console.print(f"follow it with: promptgym runs watch {run.id}")


@app.command()
def train(
    config: list[str] = typer.Option(None, "--config", "-c", help="TOML config (repeatable; later files win)."),
    env_file: Optional[str] = typer.Option(None, "--env-file", help=".env file with secrets (never printed)."),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Override data with a built-in dataset."),
    examples: Optional[int] = typer.Option(None, "--examples", min=1, help="Use only N training examples."),
    task_url: Optional[str] = typer.Option(None, "--task-url", help="Train against this task app."),
    backend: str = typer.Option("local", "--backend", help="Where rollouts run: local (this process), ray (a local "
                                "Ray instance owned by the run; in a Ray job, its cluster) or ray://HOST:PORT."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray workers (actors) for --backend ray (default 2)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override job.seed."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Don't ask for confirmation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show the resolved job, then stop."),
    poll: bool = typer.Option(True, "--poll/--no-poll", help="Stream progress, or start detached and print the run id."),
    stream_format: str = typer.Option("cli", "--stream-format", help="cli (event lines) or chart (live reward chart)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue run RUN_ID from its last checkpoint."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where run folders go (default ./runs)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", hidden=True, help="The run's id (a submitted job's)."),
) -> None:
    """Validate a config, preview the job, and train."""
    from promptgym.cli.build import build_job
    from promptgym.cli.preview import print_headroom, print_preview

    if stream_format not in ("cli", "chart"):
        fail(f"--stream-format: expected 'cli' or 'chart', got {stream_format!r}")
    try:
        spec = parse_backend(backend, workers)
    except BackendError as error:
        fail(str(error))
    folder = runs_dir or default_runs_dir()
    if resume:
        try:
            run = RunFolder.open(folder, resume)
            job_config = load_run_config(run)
        except (FileNotFoundError, ConfigError) as error:
            fail(str(error))
        status = run.status()
        if status.get("status") == "completed":
            fail(f"run {run.id} already completed")
        masker = secret_masker(env_file or status.get("env_file"), job_config)
        console.print(f"resuming run {run.id} ({status.get('epochs_done', 0)} epoch(s) done)")
        if poll:
            run_in_process(run, job_config, masker, stream_format, resume=True, backend=spec)
        else:
            start_detached(run, folder, spec)
        return
    overrides = {"model": model, "dataset": dataset, "examples": examples, "task_url": task_url, "seed": seed}
    masker = secret_masker(env_file)
    try:
        job_config = load_config(config or discover_config(), overrides)
    except ConfigError as error:
        fail(masker.mask(str(error)))
    masker.add_from_environment(secret_env_names(job_config))
    if job_config.job.type != "prompt_learning":
        console.print(f"config is valid: {job_config.job.type} job '{job_config.job.name}'")
        fail(f"job.type {job_config.job.type!r}: not implemented yet in this version (prompt_learning is)", EXIT_FAILED)
    try:
        job = asyncio.run(build_job(job_config))
    except ConfigError as error:
        fail(masker.mask(str(error)))
    print_preview(job, masker, console, backend=spec)
    if dry_run:
        console.print("dry run: nothing started (the headroom check, which calls the model, is skipped too)")
        return
    print_headroom(job, masker, console)
    if not yes and not typer.confirm("Start this run?", default=True):
        raise typer.Exit(0)
    try:
        run = RunFolder.create(folder, job_config.job.name, run_id=run_id)
    except FileExistsError:
        fail(f"--run-id {run_id}: a run with that id already exists in {folder}")
    save_resolved_config(run, job_config, masker)
    run.update_status(env_file=str(Path(env_file).resolve()) if env_file else None, config_files=config)
    if poll:
        run_in_process(run, job_config, masker, stream_format, resume=False, job=job, backend=spec)
    else:
        start_detached(run, folder, spec)


@app.command("worker", hidden=True)
def worker(run_id: str, runs_dir: Path = typer.Option(..., "--runs-dir"),
           backend: str = typer.Option("local", "--backend"), workers: Optional[int] = typer.Option(None, "--workers")) -> None:
    """Run (or resume) RUN_ID in this process without a live display (used by --no-poll)."""
    from promptgym.cli.runner import execute

    run = RunFolder.open(runs_dir, run_id)
    config = load_run_config(run)
    status = run.status()
    masker = secret_masker(status.get("env_file"), config)
    try:
        asyncio.run(execute(run, config, masker, resume=run.last_checkpoint.is_file(),
                            backend=parse_backend(backend, workers)))
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED)
    except Exception:  # noqa: BLE001 - already recorded in run.json / events.jsonl
        raise typer.Exit(EXIT_FAILED)


def main() -> None:
    """Entry point of the ``promptgym`` script."""
    app()


if __name__ == "__main__":
    main()
