"""``promptgym runs list | show ID | watch ID``."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from promptgym.cli.render import make_renderer
from promptgym.cli.runs import TERMINAL, RunFolder, default_runs_dir, list_runs, process_alive

runs_app = typer.Typer(help="Follow training runs.", no_args_is_help=True)
console = Console(highlight=False)


def _open(run_id: str, runs_dir: Optional[Path]) -> RunFolder:
    try:
        return RunFolder.open(runs_dir or default_runs_dir(), run_id)
    except FileNotFoundError as error:
        console.print(f"error: {error}", markup=False)
        raise typer.Exit(2)


def _when(timestamp: float | None) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S") if timestamp else "-"


def effective_status(status: dict) -> str:
    """A running run whose process is gone was killed: say so."""
    if status.get("status") in ("running", "starting") and status.get("pid") and not process_alive(status["pid"]):
        return "stopped (killed?)"
    return str(status.get("status"))


@runs_app.command("list")
def list_command(runs_dir: Optional[Path] = typer.Option(None, "--runs-dir")) -> None:
    """Every run, newest first."""
    table = Table("id", "status", "epochs", "baseline", "final", "created")
    for status in list_runs(runs_dir or default_runs_dir()):
        table.add_row(status["id"], effective_status(status), str(status.get("epochs_done", 0)),
                      str((status.get("baseline") or {}).get("reward", "-")),
                      str((status.get("final") or {}).get("reward", "-")), _when(status.get("created")))
    console.print(table)


@runs_app.command("show")
def show_command(run_id: str, runs_dir: Optional[Path] = typer.Option(None, "--runs-dir")) -> None:
    """Status of one run, and its summary when finished."""
    run = _open(run_id, runs_dir)
    status = run.status()
    for key in ("id", "name", "status", "epochs_done", "lm_calls", "elapsed_s", "error"):
        value = effective_status(status) if key == "status" else status.get(key)
        if value is not None:
            console.print(f"{key}: {value}", markup=False, soft_wrap=True)
    console.print(f"folder: {run.path}", markup=False, soft_wrap=True)
    summary = run.path / "summary.md"
    if summary.is_file():
        console.print(summary.read_text(encoding="utf-8"), markup=False)
    elif status.get("status") in ("interrupted", "failed") or "stopped" in effective_status(status):
        console.print(f"continue with: promptgym train --resume {run.id}", markup=False)


def watch_run(run: RunFolder, stream_format: str = "cli", poll_s: float = 0.5, timeout_s: float | None = None) -> str:
    """Replay the run's events, then follow new ones until it ends; returns the final status."""
    renderer = make_renderer(stream_format, console, job_type=run.status().get("job_type"))
    seen, started = 0, time.time()
    try:
        while True:
            for event in run.iter_events(seen):
                seen += 1
                renderer(event)
            status = run.status()
            state = effective_status(status)
            if state in TERMINAL or state.startswith("stopped"):
                for event in run.iter_events(seen):
                    seen += 1
                    renderer(event)
                return state
            if timeout_s is not None and time.time() - started > timeout_s:
                return state
            time.sleep(poll_s)
    finally:
        renderer.close()


@runs_app.command("watch")
def watch_command(run_id: str, runs_dir: Optional[Path] = typer.Option(None, "--runs-dir"),
                  stream_format: str = typer.Option("cli", "--stream-format")) -> None:
    """Stream a run's progress until it ends."""
    state = watch_run(_open(run_id, runs_dir), stream_format)
    console.print(f"run {run_id}: {state}", markup=False)
