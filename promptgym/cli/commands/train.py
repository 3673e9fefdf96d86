"""``promptgym train``: validate a config, preview the job, confirm, run (here or detached); ``--resume``; and the
hidden ``worker`` command a detached run executes in. One skeleton for every job type: the flow of the config's
``job.type`` (:func:`promptgym.cli.flows.flow_for`) supplies its steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from promptgym.cli.common import console, fail, secret_env_names, secret_masker
from promptgym.cli.config import ConfigError, JobConfig, load_config
from promptgym.cli.execution import ExecutionError, ExecutionSpec, executor_flag, parse_execution
from promptgym.cli.flows import flow_for
from promptgym.cli.launch import (
    discover_config, load_run_config, print_last_words, refuse_taken_model_name, run_attached, run_worker,
    save_resolved_config, start_detached,
)
from promptgym.runs.folder import RunFolder, default_runs_dir
from promptgym.cli.secrets import Masker


def train(
    config: list[str] = typer.Option(None, "--config", "-c", metavar="FILE",
                                     help="TOML config (repeatable; later files win)."),
    env_file: Optional[str] = typer.Option(None, "--env-file", help=".env file with secrets (never printed)."),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Override data with a built-in dataset."),
    examples: Optional[int] = typer.Option(None, "--examples", min=1, help="Use only N training examples."),
    task_url: Optional[str] = typer.Option(None, "--task-url", help="Train against this task app."),
    executor: Optional[str] = typer.Option(None, "--executor", help="Where rollouts run (and an sft job trains): local "
                                           "(this process; the default), ray (a local Ray instance owned by the run; in "
                                           "a Ray job, its cluster) or ray://HOST:PORT."),
    backend: Optional[str] = typer.Option(None, "--backend", hidden=True, help="Deprecated name of --executor."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray workers (actors) for --executor ray (default 2)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override job.seed."),
    device: Optional[str] = typer.Option(None, "--device", help="sft/rl: where weights train: auto (a GPU when "
                                         "torch sees one), cpu, cuda or cuda:N (overrides [sft]/[rl] device)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Don't ask for confirmation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and show the resolved job, then stop."),
    preview: bool = typer.Option(False, "--preview", help="Show the job, run the headroom check (a few real calls, "
                                 "timed and priced) and the run's cost estimate with its interval, then stop."),
    poll: bool = typer.Option(True, "--poll/--no-poll", help="Stream progress, or start detached and print the run id."),
    stream_format: str = typer.Option("cli", "--stream-format", help="cli (event lines) or chart (live reward chart)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue run RUN_ID from its last checkpoint."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where run folders go (default ./runs)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", hidden=True, help="The run's id (a submitted job's)."),
) -> None:
    """Validate a config, preview the job, and train."""
    if stream_format not in ("cli", "chart"):
        fail(f"--stream-format: expected 'cli' or 'chart', got {stream_format!r}")
    try:
        execution = parse_execution(executor_flag(executor, backend), workers)
    except ExecutionError as error:
        fail(str(error))
    folder = runs_dir or default_runs_dir()
    if resume:
        resume_run(resume, folder, env_file, {"--config": config, "--model": model, "--dataset": dataset,
                                              "--examples": examples, "--task-url": task_url, "--seed": seed,
                                              "--device": device},
                   yes=yes, dry_run=dry_run, poll=poll, stream_format=stream_format, execution=execution)
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
    start_run(job_config, config, env_file, masker, folder, yes=yes, dry_run=dry_run, poll=poll,
              stream_format=stream_format, execution=execution, run_id=run_id, preview=preview)


def start_run(job_config: JobConfig, config_files: list[str] | None, env_file: Optional[str], masker: Masker,
              runs_dir: Path, yes: bool, dry_run: bool, poll: bool, stream_format: str, execution: ExecutionSpec,
              run_id: str | None = None, preview: bool = False) -> None:
    """A new run: prepare and preview (the flow's), confirm, create the run folder, run here or detached."""
    flow = flow_for(job_config.job.type)
    problem = flow.check_execution(execution, job_config)
    if problem:
        fail(problem)
    last_words = None
    with flow.environment(job_config, masker, runs_dir) as effective:
        prepared = flow.prepare(effective, masker, execution, resuming=False)
        if dry_run:
            console.print(flow.dry_run_note())
            return
        flow.confirm_checks(prepared, masker)
        if preview:
            console.print("preview: nothing started")
            return
        if not yes and not typer.confirm("Start this run?", default=True):
            raise typer.Exit(0)
        try:
            run = RunFolder.create(runs_dir, job_config.job.name, run_id=run_id)
        except FileExistsError:
            fail(f"--run-id {run_id}: a run with that id already exists in {runs_dir}")
        save_resolved_config(run, job_config, masker)
        run.update_status(env_file=str(Path(env_file).resolve()) if env_file else None, config_files=config_files,
                          job_type=job_config.job.type)
        if poll:
            last_words = run_attached(flow, run, effective, masker, stream_format, resume=False, prepared=prepared,
                                      execution=execution)
        else:
            flow.release(prepared)
            start_detached(run, runs_dir, execution)
    print_last_words(last_words)


def resume_run(run_id: str, folder: Path, env_file: Optional[str], refused: dict[str, Any], yes: bool, dry_run: bool,
               poll: bool, stream_format: str, execution: ExecutionSpec) -> None:
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
    flow = flow_for(job_config.job.type)
    problem = flow.check_execution(execution, job_config)
    if problem:
        fail(problem)
    from_checkpoint = flow.announce_resume(run, status)
    last_words = None
    with flow.environment(job_config, masker, folder) as effective:
        prepared = flow.prepare(effective, masker, execution, resuming=True)
        if dry_run:
            console.print("dry run: nothing resumed")
            return
        if not yes and not typer.confirm("Resume this run?", default=True):
            raise typer.Exit(0)
        if poll:
            last_words = run_attached(flow, run, effective, masker, stream_format, resume=from_checkpoint,
                                      prepared=prepared, execution=execution)
        else:
            flow.release(prepared)
            start_detached(run, folder, execution)
    print_last_words(last_words)


def worker(run_id: str, runs_dir: Path = typer.Option(..., "--runs-dir"),
           executor: Optional[str] = typer.Option(None, "--executor"),
           backend: Optional[str] = typer.Option(None, "--backend", hidden=True),
           workers: Optional[int] = typer.Option(None, "--workers")) -> None:
    """Run (or resume) RUN_ID in this process without a live display (used by --no-poll)."""
    run = RunFolder.open(runs_dir, run_id)
    config = load_run_config(run)
    masker = secret_masker(run.status().get("env_file"), config)
    try:
        execution = parse_execution(executor_flag(executor, backend), workers)
    except ExecutionError as error:
        fail(str(error))
    run_worker(run, config, masker, runs_dir, execution)
