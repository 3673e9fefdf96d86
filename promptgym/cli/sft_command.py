"""The ``promptgym train`` steps of an sft job (main.py dispatches here on ``job.type``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from promptgym.cli.backend import BackendSpec
from promptgym.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, fail
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.main import save_resolved_config, start_detached
from promptgym.cli.runs import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.sft_runner import has_checkpoint, prepare_sft, print_sft_preview, resume_message, run_sft_in_process


def run_sft(run: RunFolder, config: JobConfig, masker: Masker, stream_format: str, resume: bool, job: object = None,
            backend: BackendSpec | None = None) -> None:
    try:
        status = run_sft_in_process(run, config, masker, stream_format, resume, console, job=job, backend=backend)
    except ConfigError as error:
        fail(masker.mask(str(error)))
    except Exception as error:  # noqa: BLE001 - the run folder has the details; say it plainly
        fail(masker.mask(f"run {run.id} failed: {type(error).__name__}: {error}"), EXIT_FAILED)
    if status is None:
        console.print(f"interrupted; checkpoint saved. Continue with: promptgym train --resume {run.id}")
        raise typer.Exit(EXIT_INTERRUPTED)
    console.print(f"done: {run.path / 'summary.md'}")
    console.print(f"model: {run.status().get('model_id')}  (list them with: promptgym models list)")


def train_sft(config: JobConfig, config_files: list[str], env_file: Optional[str], masker: Masker, runs_dir: Path,
              yes: bool, dry_run: bool, poll: bool, stream_format: str, backend: BackendSpec) -> None:
    """Prepare (load, check rows, measure a step), preview, confirm, run (here, or on Ray Train with --backend ray)."""
    console.print(f"preparing: loading {config.sft.base_model} and checking every row ...")  # type: ignore[union-attr]
    try:
        job = prepare_sft(config)
    except ConfigError as error:
        fail(masker.mask(str(error)))
    step_seconds = job.measure_step_seconds()
    print_sft_preview(job, config, step_seconds, masker, console, backend)
    if dry_run:
        console.print("dry run: nothing started")
        return
    if not yes and not typer.confirm("Start this run?", default=True):
        raise typer.Exit(0)
    run = RunFolder.create(runs_dir, config.job.name)
    save_resolved_config(run, config, masker)
    run.update_status(env_file=str(Path(env_file).resolve()) if env_file else None, config_files=config_files,
                      job_type="sft")
    if poll:
        run_sft(run, config, masker, stream_format, resume=False, job=job, backend=backend)
    else:
        job.release()
        start_detached(run, runs_dir, backend)


def announce_sft_resume(run: RunFolder, backend: BackendSpec) -> bool:
    """Say where the run continues: after its last checkpoint (optimizer, schedule and RNG included), or from the
    start when it has none; returns whether a checkpoint is resumed."""
    console.print(resume_message(run, "step"), markup=False, soft_wrap=True)
    return has_checkpoint(run)


def sft_worker(run: RunFolder, config: JobConfig, masker: Masker, backend: BackendSpec | None = None) -> None:
    """The detached process of ``--no-poll``: no live display, everything in the run folder."""
    from promptgym.cli.sft_runner import execute_sft

    try:
        execute_sft(run, config, masker, resume=has_checkpoint(run), backend=backend)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED)
    except Exception:  # noqa: BLE001 - already recorded in run.json / events.jsonl
        raise typer.Exit(EXIT_FAILED)
