"""``promptgym``: train from TOML configs; follow runs.

    promptgym train --config examples/configs/arithmetic_fewshot.toml --yes
    promptgym train --resume RUN_ID
    promptgym submit --config run.toml --address http://127.0.0.1:8265
    promptgym runs list | show ID | watch ID | stop ID
    promptgym models list
    promptgym export-sft-data --run RUN_ID -o distilled.jsonl
    promptgym serve best_program.json | --run RUN_ID [--mcp stdio|http]
    promptgym export-prompt best_program.json --format openai-json [--check test.jsonl]
    promptgym doctor
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

from promptgym.cli.backend import BackendError, BackendSpec, parse_backend
from promptgym.cli.common import (
    EXIT_FAILED, EXIT_INTERRUPTED, console, fail, hide_flag_value_types, secret_env_names, secret_masker,
)
from promptgym.cli.doctor_command import doctor_command
from promptgym.cli.export_command import export_sft_data_command
from promptgym.cli.export_prompt_command import export_prompt_command
from promptgym.cli.config import ConfigError, JobConfig, load_config, read_toml, resolved_dict, validate_config
from promptgym.cli.models_commands import models_app
from promptgym.cli.process_identity import process_identity
from promptgym.cli.runs import RunFolder, default_runs_dir
from promptgym.cli.runs_commands import runs_app
from promptgym.cli.serve_command import serve_command
from promptgym.cli.secrets import Masker
from promptgym.cli.submit import submit

hide_flag_value_types()
app = typer.Typer(help="Train LM programs' prompts from TOML configs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
app.add_typer(runs_app, name="runs")
app.add_typer(models_app, name="models")
app.command("submit")(submit)
app.command("export-sft-data")(export_sft_data_command)
app.command("serve")(serve_command)
app.command("export-prompt")(export_prompt_command)
app.command("doctor")(doctor_command)


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

    # Values are masked, never keys: the file stays valid TOML whatever the secrets are.
    run.write_text("config.toml", tomli_w.dumps(masker.mask_data(resolved_dict(config))))


def load_run_config(run: RunFolder) -> JobConfig:
    path = run.path / "config.toml"
    return validate_config(read_toml(path), str(path))


def run_in_process(run: RunFolder, config: JobConfig, masker: Masker, stream_format: str, resume: bool,
                   job: Any = None, backend: BackendSpec | None = None) -> None:
    from promptgym.cli.render import make_renderer
    from promptgym.cli.runner import execute

    renderer = make_renderer(stream_format, console)
    try:
        status = asyncio.run(execute(run, config, masker, [renderer], resume=resume, job=job, backend=backend))
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM (the run cancels itself)
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
    run.update_status(pid=process.pid, process=process_identity(process.pid), status="starting")
    console.print(f"started run {run.id} (pid {process.pid})")
    console.print(f"follow it with: promptgym runs watch {run.id}")


@app.command()
def train(
    config: list[str] = typer.Option(None, "--config", "-c", metavar="FILE",
                                     help="TOML config (repeatable; later files win)."),
    env_file: Optional[str] = typer.Option(None, "--env-file", help=".env file with secrets (never printed)."),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Override data with a built-in dataset."),
    examples: Optional[int] = typer.Option(None, "--examples", min=1, help="Use only N training examples."),
    task_url: Optional[str] = typer.Option(None, "--task-url", help="Train against this task app."),
    backend: str = typer.Option("local", "--backend", help="Where rollouts run: local (this process), ray (a local "
                                "Ray instance owned by the run; in a Ray job, its cluster) or ray://HOST:PORT."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray workers (actors) for --backend ray (default 2)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override job.seed."),
    device: Optional[str] = typer.Option(None, "--device", help="sft/rl: where weights train: auto (a GPU when "
                                         "torch sees one), cpu, cuda or cuda:N (overrides [sft]/[rl] device)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Don't ask for confirmation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show the resolved job, then stop."),
    poll: bool = typer.Option(True, "--poll/--no-poll", help="Stream progress, or start detached and print the run id."),
    stream_format: str = typer.Option("cli", "--stream-format", help="cli (event lines) or chart (live reward chart)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue run RUN_ID from its last checkpoint."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where run folders go (default ./runs)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", hidden=True, help="The run's id (a submitted job's)."),
) -> None:
    """Validate a config, preview the job, and train."""
    from promptgym.cli.preview import print_headroom, print_sft_step_times

    if stream_format not in ("cli", "chart"):
        fail(f"--stream-format: expected 'cli' or 'chart', got {stream_format!r}")
    try:
        spec = parse_backend(backend, workers)
    except BackendError as error:
        fail(str(error))
    folder = runs_dir or default_runs_dir()
    if resume:
        resume_run(resume, folder, env_file, {"--config": config, "--model": model, "--dataset": dataset,
                                              "--examples": examples, "--task-url": task_url, "--seed": seed,
                                              "--device": device},
                   yes=yes, dry_run=dry_run, poll=poll, stream_format=stream_format, backend=spec)
        return
    overrides = {"model": model, "dataset": dataset, "examples": examples, "task_url": task_url, "seed": seed,
                 "device": device}
    masker = secret_masker(env_file)
    try:
        job_config = load_config(config or discover_config(), overrides)
    except ConfigError as error:
        fail(masker.mask(str(error)))
    masker.add_from_environment(secret_env_names(job_config))
    refuse_taken_model_name(job_config, None)
    if job_config.job.type == "sft":
        from promptgym.cli.sft_command import train_sft

        return train_sft(job_config, config, env_file, masker, folder, yes, dry_run, poll, stream_format, spec)
    if job_config.job.type == "rl":
        from promptgym.cli.rl_command import train_rl

        return train_rl(job_config, config, env_file, masker, folder, yes, dry_run, poll, stream_format, spec)
    with task_app_for(job_config, masker, folder) as effective:
        job = prepare_job(effective, masker, spec)
        if dry_run:
            console.print("dry run: nothing started (the headroom check, which calls the model, is skipped too)")
            return
        print_headroom(job, masker, console)
        try:
            print_sft_step_times(job, console)
        except ValueError as error:  # FineTune's errors: a model it cannot train, no labels to train on
            fail(masker.mask(str(error)))
        if not yes and not typer.confirm("Start this run?", default=True):
            raise typer.Exit(0)
        try:
            run = RunFolder.create(folder, job_config.job.name, run_id=run_id)
        except FileExistsError:
            fail(f"--run-id {run_id}: a run with that id already exists in {folder}")
        save_resolved_config(run, job_config, masker)
        run.update_status(env_file=str(Path(env_file).resolve()) if env_file else None, config_files=config)
        if poll:
            run_in_process(run, effective, masker, stream_format, resume=False, job=job, backend=spec)
        else:
            start_detached(run, folder, spec)


@contextlib.contextmanager
def task_app_for(config: JobConfig, masker: Masker, runs_dir: Path) -> Iterator[JobConfig]:
    """The config with its ``data.task_app`` started for the block (exit 2 when it won't start)."""
    from promptgym.cli.task_app_process import running_task_app

    try:
        with running_task_app(config, masker, runs_dir) as effective:
            yield effective
    except ConfigError as error:
        fail(masker.mask(str(error)))


def prepare_job(job_config: JobConfig, masker: Masker, backend: BackendSpec | None = None) -> Any:
    """Build the job (a config's factory runs here), preview it, and check its models answer; exit 2 if not."""
    from promptgym.cli.build import build_job
    from promptgym.cli.preflight import check_models
    from promptgym.cli.preview import print_preview

    async def build_and_check() -> Any:
        job = await build_job(job_config)
        print_preview(job, masker, console, backend=backend)
        await check_models(job)
        return job

    try:
        return asyncio.run(build_and_check())
    except ConfigError as error:
        fail(masker.mask(str(error)))


def refuse_taken_model_name(job_config: JobConfig, run: RunFolder | None) -> None:
    """A weight run whose ``model_name`` another run registered would fail after training and export: exit 2 now."""
    from promptgym.lm.finetuned_models import name_taken_problem

    section = job_config.job.type
    name = getattr(getattr(job_config, section, None), "model_name", None)
    problem = name_taken_problem(name, str(run.path.resolve()) if run else None) if name else None
    if problem:
        fail(f"{section}.model_name: {problem}")


def resume_run(run_id: str, folder: Path, env_file: Optional[str], refused: dict[str, Any], yes: bool, dry_run: bool,
               poll: bool, stream_format: str, backend: BackendSpec) -> None:
    """``train --resume``: the run's own config, previewed (and checked) like a new run, confirmed unless ``--yes``."""
    given = [flag for flag, value in refused.items() if value]
    if given:
        fail(f"{', '.join(given)} can't be used with --resume: a resumed run keeps the config it started with "
             f"(its config.toml). Start a new run to change it.")
    try:
        run = RunFolder.open(folder, run_id)
        status = run.status()
        job_config = load_run_config(run)
    except (FileNotFoundError, ValueError) as error:
        fail(str(error))
    if status.get("status") == "completed":
        fail(f"run {run.id} already completed")
    masker = secret_masker(env_file or status.get("env_file"), job_config)
    refuse_taken_model_name(job_config, run)
    if job_config.job.type == "rl":
        from promptgym.cli.rl_command import resume_rl

        return resume_rl(run, job_config, masker, folder, yes, dry_run, poll, stream_format, backend)
    with contextlib.ExitStack() as apps:
        if job_config.job.type == "sft":
            from promptgym.cli.sft_command import announce_sft_resume, run_sft

            resume_from_checkpoint = announce_sft_resume(run, backend)

            def run_here() -> None:
                run_sft(run, job_config, masker, stream_format, resume=resume_from_checkpoint, backend=backend)
        else:
            checkpoint, note = run.usable_checkpoint()
            console.print(f"resuming run {run.id} ({status.get('epochs_done', 0)} epoch(s) done) from "
                          f"{checkpoint.relative_to(run.path) if checkpoint else 'the start'}" + (f": {note}" if note else ""),
                          soft_wrap=True)
            effective = apps.enter_context(task_app_for(job_config, masker, folder))
            job = prepare_job(effective, masker, backend)

            def run_here() -> None:
                run_in_process(run, effective, masker, stream_format, resume=True, job=job, backend=backend)
        if dry_run:
            console.print("dry run: nothing resumed")
            return
        if not yes and not typer.confirm("Resume this run?", default=True):
            raise typer.Exit(0)
        if poll:
            run_here()
        else:
            start_detached(run, folder, backend)


@app.command("worker", hidden=True)
def worker(run_id: str, runs_dir: Path = typer.Option(..., "--runs-dir"),
           backend: str = typer.Option("local", "--backend"), workers: Optional[int] = typer.Option(None, "--workers")) -> None:
    """Run (or resume) RUN_ID in this process without a live display (used by --no-poll)."""
    from promptgym.cli.runner import execute

    run = RunFolder.open(runs_dir, run_id)
    config = load_run_config(run)
    status = run.status()
    masker = secret_masker(status.get("env_file"), config)
    if config.job.type == "sft":
        from promptgym.cli.sft_command import sft_worker

        return sft_worker(run, config, masker, parse_backend(backend, workers))
    if config.job.type == "rl":
        from promptgym.cli.rl_command import rl_worker

        return rl_worker(run, config, masker, runs_dir)
    try:
        with task_app_for(config, masker, runs_dir) as effective:
            asyncio.run(execute(run, effective, masker, resume=run.events_path.is_file(),  # an earlier session ran
                                backend=parse_backend(backend, workers)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(EXIT_INTERRUPTED)
    except Exception:  # noqa: BLE001 - already recorded in run.json / events.jsonl
        raise typer.Exit(EXIT_FAILED)


def main() -> None:
    """Entry point of the ``promptgym`` script."""
    app()


if __name__ == "__main__":
    main()
