"""What ``train``, ``--resume`` and the detached worker do for every job type, written once; the flow
(:mod:`promptgym.cli.flows`) supplies the differences.

    run_attached(flow, run, config, masker, "cli", resume=False, prepared=job, execution=spec)
    start_detached(run, runs_dir, spec)       # --no-poll: `promptgym.cli.main worker RUN_ID` in the background
    run_worker(run, config, masker, runs_dir, spec)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import tomli_w
import typer

from promptgym.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, fail
from promptgym.cli.config import ConfigError, JobConfig, read_toml, resolved_dict, validate_config
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.flows import Flow, flow_for
from promptgym.runs.process_identity import process_identity
from promptgym.cli.render import make_renderer
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.task_app_process import running_task_app
from promptgym.lm.finetuned_models import name_taken_problem


def discover_config() -> list[str]:
    """The one ``*.toml`` of the current folder, or the one the user picks."""
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
    # Values are masked, never keys: the file stays valid TOML whatever the secrets are.
    run.write_text("config.toml", tomli_w.dumps(masker.mask_data(resolved_dict(config))))


def load_run_config(run: RunFolder) -> JobConfig:
    path = run.path / "config.toml"
    return validate_config(read_toml(path), str(path))


@contextlib.contextmanager
def task_app_for(config: JobConfig, masker: Masker, runs_dir: Path) -> Iterator[JobConfig]:
    """The config with its ``data.task_app`` started for the block (exit 2 when it won't start)."""
    try:
        with running_task_app(config, masker, runs_dir) as effective:
            yield effective
    except ConfigError as error:
        fail(masker.mask(str(error)))


def refuse_taken_model_name(config: JobConfig, run: RunFolder | None) -> None:
    """A weight run whose ``model_name`` another run registered would fail after training and export: exit 2 now."""
    flow = flow_for(config.job.type)
    name = flow.model_name(config)
    problem = name_taken_problem(name, str(run.path.resolve()) if run else None) if name else None
    if problem:
        fail(f"{flow.settings_section}.model_name: {problem}")


def start_detached(run: RunFolder, runs_dir: Path, execution: ExecutionSpec) -> None:
    command = [sys.executable, "-m", "promptgym.cli.main", "worker", run.id, "--runs-dir", str(runs_dir),
               *execution.arguments()]
    with (run.path / "worker.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, cwd=os.getcwd())
    run.update_status(pid=process.pid, process=process_identity(process.pid), status="starting")
    console.print(f"started run {run.id} (pid {process.pid})")
    console.print(f"follow it with: promptgym runs watch {run.id}")


def run_attached(flow: Flow, run: RunFolder, config: JobConfig, masker: Masker, stream_format: str, resume: bool,
                 prepared: Any, execution: ExecutionSpec) -> str | None:
    """Run in this process with a live renderer; exits 130 on Ctrl-C (checkpoint saved), 2 on a bad config,
    1 on a failure. Returns the flow's last words, printed once its environment is stopped."""
    renderer = make_renderer(stream_format, console, flow.chart)
    try:
        status = flow.execute(run, config, masker, [renderer], resume, prepared, execution)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM (the run stops itself)
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
    return flow.report(run, status, console)


def print_last_words(words: str | None) -> None:
    if words is not None:
        console.print(words, markup=False, highlight=False, soft_wrap=True)


def run_worker(run: RunFolder, config: JobConfig, masker: Masker, runs_dir: Path, execution: ExecutionSpec) -> None:
    """The detached process of ``--no-poll``: no live display, everything in the run folder."""
    flow = flow_for(config.job.type)
    try:
        with flow.environment(config, masker, runs_dir) as effective:
            flow.execute(run, effective, masker, None, flow.resumes_in_worker(run), None, execution)
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(EXIT_INTERRUPTED)
    except Exception:  # noqa: BLE001 - already recorded in run.json / events.jsonl
        raise typer.Exit(EXIT_FAILED)
