"""The ``promptgym train`` steps of an rl job (main.py dispatches here on ``job.type``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Optional

import typer

from promptgym.cli.backend import BackendSpec
from promptgym.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, fail
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.main import save_resolved_config, start_detached, task_app_for
from promptgym.cli.rl_runner import connect_environment, execute_rl, prepare_rl, print_rl_preview
from promptgym.cli.runs import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.sft_runner import has_checkpoint, resume_message


def _local_only(backend: BackendSpec) -> None:
    if backend.kind != "local":
        fail(f"--backend {backend.kind}: an rl job trains in this process (use --backend local)")


def _prepare(config: JobConfig, masker: Masker) -> tuple[Any, Any]:
    """(environment, job): the app checked first (a wrong key stops here, before the model loads)."""
    try:
        environment = asyncio.run(connect_environment(config))
        console.print(f"preparing: loading {config.rl.base_model} ...")  # type: ignore[union-attr]
        return environment, prepare_rl(config)
    except ConfigError as error:
        fail(masker.mask(str(error)))
    raise AssertionError("unreachable")


def run_rl(run: RunFolder, config: JobConfig, masker: Masker, stream_format: str, resume: bool, job: Any = None,
           environment: Any = None) -> dict[str, Any]:
    """Run with a live renderer; returns the final status (the caller prints it last, once the app is stopped)."""
    from promptgym.cli.render import make_renderer

    renderer = make_renderer(stream_format, console, job_type="rl")
    try:
        status = asyncio.run(execute_rl(run, config, masker, [renderer], resume=resume, job=job, environment=environment))
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
    return status["final_status"]


def print_final_status(final: dict[str, Any] | None) -> None:
    """The run's last words: the final status JSON (also in the run folder's ``final_status.json``)."""
    if final is not None:
        console.print(json.dumps(final, indent=2), markup=False, highlight=False, soft_wrap=True)


def train_rl(config: JobConfig, config_files: list[str], env_file: Optional[str], masker: Masker, runs_dir: Path,
             yes: bool, dry_run: bool, poll: bool, stream_format: str, backend: BackendSpec) -> None:
    """Start the task app (``data.task_app``), check it, load the base model, preview, confirm, run."""
    _local_only(backend)
    final = None
    with task_app_for(config, masker, runs_dir) as effective:
        environment, job = _prepare(effective, masker)
        print_rl_preview(job, environment, effective, masker, console)
        if dry_run:
            console.print("dry run: nothing started")
            return
        if not yes and not typer.confirm("Start this run?", default=True):
            raise typer.Exit(0)
        run = RunFolder.create(runs_dir, config.job.name)
        save_resolved_config(run, config, masker)
        run.update_status(env_file=str(Path(env_file).resolve()) if env_file else None, config_files=config_files,
                          job_type="rl")
        if poll:
            final = run_rl(run, effective, masker, stream_format, resume=False, job=job, environment=environment)
        else:
            job.release()
            start_detached(run, runs_dir, backend)
    print_final_status(final)


def resume_rl(run: RunFolder, config: JobConfig, masker: Masker, runs_dir: Path, yes: bool, dry_run: bool, poll: bool,
              stream_format: str, backend: BackendSpec) -> None:
    """Continue after the last checkpoint (adapter, optimiser, schedule, RNG), or start over without one."""
    _local_only(backend)
    resume = has_checkpoint(run)
    console.print(resume_message(run, "iteration"), markup=False, soft_wrap=True)
    final = None
    with task_app_for(config, masker, runs_dir) as effective:
        environment, job = _prepare(effective, masker)
        print_rl_preview(job, environment, effective, masker, console)
        if dry_run:
            console.print("dry run: nothing resumed")
            return
        if not yes and not typer.confirm("Resume this run?", default=True):
            raise typer.Exit(0)
        if poll:
            final = run_rl(run, effective, masker, stream_format, resume=resume, job=job, environment=environment)
        else:
            job.release()
            start_detached(run, runs_dir, backend)
    print_final_status(final)


def rl_worker(run: RunFolder, config: JobConfig, masker: Masker, runs_dir: Path) -> None:
    """The detached process of ``--no-poll``: no live display, everything in the run folder."""
    try:
        with task_app_for(config, masker, runs_dir) as effective:
            asyncio.run(execute_rl(run, effective, masker, resume=has_checkpoint(run)))
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED)
    except Exception:  # noqa: BLE001 - already recorded in run.json / events.jsonl
        raise typer.Exit(EXIT_FAILED)
