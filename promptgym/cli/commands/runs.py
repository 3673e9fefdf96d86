"""``promptgym runs list | show ID | watch ID | stop ID | compare A B``; submitted runs (Ray jobs) too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Column, Table

from promptgym.cli.flows import flow_of_run
from promptgym.cli.render import make_renderer
from promptgym.runs.folder import TERMINAL, RunFolder, default_runs_dir, list_runs, run_process_state
from promptgym.cli.secrets import load_env_file
from promptgym.core.atomic import atomic_write_text
from promptgym.datasets.loaders import DatasetError
from promptgym.datasets.traces import from_traces
from promptgym.distributed.jobs import RayJobs  # HTTP to a cluster's Jobs API; ray itself is not imported
from promptgym.programs.program import Program
from promptgym.training.held_out import HELD_OUT_FILE, compare_on

runs_app = typer.Typer(help="Follow and stop training runs, local or submitted to Ray.", no_args_is_help=True)
console = Console(highlight=False)
LIST_COLUMNS_WIDTH = 62
"""What ``runs list``'s columns beside the id and the model need (status, progress, scores, date, gaps)."""


def _open(run_id: str, runs_dir: Optional[Path]) -> RunFolder:
    try:
        return RunFolder.open(runs_dir or default_runs_dir(), run_id)
    except FileNotFoundError as error:
        console.print(f"error: {error}", markup=False)
        raise typer.Exit(2)


def _status(run: RunFolder) -> dict[str, Any]:
    """run.json, or exit 2 with an error naming it (a hand edit or a disk error can break it)."""
    try:
        status = run.status()
    except (OSError, ValueError) as error:
        console.print(f"error: {error}", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    if not isinstance(status, dict):
        console.print(f"error: {run.path / 'run.json'}: expected a JSON object, got {type(status).__name__}", markup=False)
        raise typer.Exit(2)
    return status


def _when(timestamp: float | None, short: bool = False) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S") if timestamp else "-"


def progress_cells(status: dict[str, Any]) -> tuple[str, str, str, str]:
    """(progress, baseline, final, model) of a run in its own terms (its flow's: epochs and rewards for prompt
    learning, steps and loss for SFT, iterations and test reward before/after for RL)."""
    return flow_of_run(status).progress_cells(status)


def submitted_status(run: RunFolder, status: dict[str, Any]) -> str:
    """A submitted run's status from its cluster (recorded in run.json); the last known one if unreachable."""
    try:
        current = RayJobs(status["ray_address"]).status(run.id)
    except Exception:  # noqa: BLE001 - an unreachable cluster is a state to show, not a crash
        return f"{status.get('status')} (cluster {status['ray_address']} unreachable)"
    if current != status.get("status"):
        run.update_status(status=current)
    return current


def effective_status(status: dict, run: RunFolder | None = None) -> str:
    """A submitted run asks its cluster; a running run whose process is gone was killed: say so."""
    if status.get("ray_address") and run is not None and status.get("status") not in TERMINAL:
        return submitted_status(run, status)
    if status.get("status") in ("running", "starting") and status.get("pid") and run_process_state(status) == "gone":
        # It may have finished between reading run.json and looking for it: only the newest status says killed.
        latest = status
        if run is not None:
            with contextlib.suppress(OSError, ValueError):
                latest = run.status()
        return "stopped (killed?)" if latest.get("status") in ("running", "starting") else str(latest.get("status"))
    return str(status.get("status"))


@runs_app.command("list")
def list_command(runs_dir: Optional[Path] = typer.Option(None, "--runs-dir"),
                 address: Optional[str] = typer.Option(None, "--address", help="List the promptgym Ray jobs of this "
                                                       "Ray cluster (dashboard address) instead.")) -> None:
    """Every run, newest first."""
    if address:
        table = Table("id", "status", "started", "message")
        for job in RayJobs(address).jobs():
            table.add_row(job["id"], job["status"], _when((job["start_time"] or 0) / 1000), job["message"] or "")
        console.print(table)
        return
    folder = runs_dir or default_runs_dir()
    unreadable: list[tuple[Path, str]] = []
    rows = [(status["id"], effective_status(status, RunFolder(folder / status["id"])), *progress_cells(status),
             _when(status.get("created") if isinstance(status.get("created"), (int, float)) else None, short=True))
            for status in list_runs(folder, unreadable)]
    id_width = max((len(row[0]) for row in rows), default=2)
    model_width = max((len(row[5]) for row in rows), default=5)
    if id_width + model_width + LIST_COLUMNS_WIDTH > console.width:  # never cut an id or a model (users copy them)
        for run_id, state, progress, baseline, final, model, created in rows:
            console.print(run_id, markup=False, soft_wrap=True)
            console.print(f"  {state}, {progress}, baseline {baseline}, final {final}, created {created}"
                          + (f"\n  model {model}" if model != "-" else ""), markup=False, soft_wrap=True)
    else:
        table = Table(Column("id", no_wrap=True, min_width=id_width), "status", "progress", "baseline", "final",
                      Column("model", no_wrap=True, min_width=model_width), "created", box=None, pad_edge=False)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for path, problem in unreadable:
        console.print(f"{path.name}: not listed, its run.json can't be read ({problem})", markup=False, soft_wrap=True)


@runs_app.command("show")
def show_command(run_id: str, runs_dir: Optional[Path] = typer.Option(None, "--runs-dir"),
                 log_lines: int = typer.Option(40, "--log-lines", help="Lines of a submitted run's Ray job log to show.")) -> None:
    """Status of one run, and its summary when finished."""
    run = _open(run_id, runs_dir)
    status = _status(run)
    for key in ("id", "name", "status", "epochs_done", "lm_calls", "elapsed_s", "error"):
        value = effective_status(status, run) if key == "status" else status.get(key)
        if value is not None:
            console.print(f"{key}: {value}", markup=False, soft_wrap=True)
    console.print(f"folder: {run.path}", markup=False, soft_wrap=True)
    if status.get("ray_address"):
        show_submitted(run, status, log_lines)
        return
    summary = run.path / "summary.md"
    if summary.is_file():
        console.print(summary.read_text(encoding="utf-8"), markup=False)
    elif status.get("status") in ("interrupted", "failed") or "stopped" in effective_status(status):
        console.print(f"continue with: promptgym train --resume {run.id}", markup=False)


def watch_run(run: RunFolder, stream_format: str = "cli", poll_s: float = 0.5, timeout_s: float | None = None) -> str:
    """Replay the run's events, then follow new ones until it ends; returns the final status."""
    renderer = make_renderer(stream_format, console, flow_of_run(run.status()).chart)
    next_line, started = 0, time.time()

    def skipped(number: int, text: str) -> None:
        console.print(f"events.jsonl line {number} is not a JSON event; skipped: {text[:80]!r}", markup=False)

    def show_new() -> None:
        nonlocal next_line
        events, next_line = run.read_events(next_line, on_bad_line=skipped)
        for event in events:
            renderer(event)

    try:
        while True:
            show_new()
            state = effective_status(_status(run), run)
            if state in TERMINAL or state.startswith("stopped"):
                show_new()
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


def show_submitted(run: RunFolder, status: dict[str, Any], log_lines: int) -> None:
    """The cluster's view of a submitted run, and the end of its log, secrets masked."""
    env_file = status.get("env_file")
    masker = load_env_file(env_file if env_file and Path(env_file).is_file() else None)
    console.print(f"cluster: {status['ray_address']}", markup=False, soft_wrap=True)
    try:
        jobs = RayJobs(status["ray_address"])
        details = jobs.details(run.id)
        log = jobs.logs(run.id)
    except Exception as error:  # noqa: BLE001 - say why, keep the record
        console.print(masker.mask(f"cluster unreachable: {type(error).__name__}: {error}"), markup=False)
        return
    for key in ("ray_status", "message", "entrypoint", "env_vars"):
        value = ", ".join(details[key]) if key == "env_vars" else details[key]
        console.print(masker.mask(f"{key}: {value}"), markup=False, soft_wrap=True)
    tail = log.splitlines()[-log_lines:]
    console.print(f"--- last {len(tail)} log lines ---", markup=False)
    console.print(masker.mask("\n".join(tail)), markup=False, soft_wrap=True)


@runs_app.command("stop")
def stop_command(run_id: str, runs_dir: Optional[Path] = typer.Option(None, "--runs-dir")) -> None:
    """Stop a run: a submitted one through its cluster, a detached local one by its process id."""
    run = _open(run_id, runs_dir)
    status = _status(run)
    state = effective_status(status, run)
    if state in TERMINAL or (state.startswith("stopped") and not status.get("pid")):
        console.print(f"run {run.id} is not running ({state})", markup=False)
        return
    if status.get("ray_address"):
        RayJobs(status["ray_address"]).stop(run.id)
        console.print(f"stop requested for job {run.id} on {status['ray_address']}", markup=False)
        return
    state = run_process_state(status)
    if state != "alive":
        pid = status.get("pid")
        if state == "unverified":
            console.print(f"run {run.id}: pid {pid} is alive but run.json does not record which process it was "
                          f"(written by an older promptgym), so it is not signalled; if `ps -p {pid}` shows the "
                          f"run's worker, stop it with: kill {pid}", markup=False, soft_wrap=True)
            raise typer.Exit(1)
        run.update_status(status="interrupted", pid=None,
                          error=f"its process (pid {pid}) was gone (killed, out of memory, or the machine restarted)")
        console.print(f"run {run.id}'s process (pid {pid}) is gone: nothing to stop (any process now holding that pid "
                      f"is another program and was left alone); marked interrupted. Continue with: promptgym train "
                      f"--resume {run.id}", markup=False, soft_wrap=True)
        raise typer.Exit(1)
    os.kill(status["pid"], signal.SIGTERM)  # the run checkpoints and records 'interrupted'
    console.print(f"sent SIGTERM to run {run.id} (pid {status['pid']})", markup=False)


@runs_app.command("compare")
def compare_command(
    before: str = typer.Argument(..., metavar="SERVED", help="The served program: a program file or a run id."),
    after: str = typer.Argument(..., metavar="RETRAINED", help="The retrained program: a program file or a run id."),
    traces: Path = typer.Option(..., "--traces", help="The trace store (the folder of serve --record)."),
    program: Optional[str] = typer.Option(None, "--program", help="Whose traces (default: SERVED's name)."),
    holdout: float = typer.Option(0.2, "--holdout", min=0.0, max=0.99,
                                  help="Compare on the newest fraction of labelled traces (what a retraining from "
                                       "the same store with traces_holdout held out); 0: all of them."),
    min_rating: Optional[float] = typer.Option(None, "--min-rating",
                                               help="Also take outputs rated at least this as labels."),
    reward: str = typer.Option("exactmatch", "--reward", help="The reward both are scored with."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir"),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """The served program against the retrained one on held-out traffic: scores, intervals, a paired test.

    When RETRAINED is a run, the comparison is also kept in its folder (``held_out.json``) for ``promptgym ui``.
    """
    programs = [Program.load(str(_program_file(name, runs_dir))) for name in (before, after)]
    wanted = program or programs[0].name
    try:
        data = from_traces(traces, programs[0].input_data_model, programs[0].output_data_model, program=wanted,
                           min_rating=min_rating, holdout=holdout)
    except DatasetError as error:
        raise typer.BadParameter(str(error), param_hint="--traces") from None
    x, y = data[1] if holdout else data
    if len(x) == 0:
        raise typer.BadParameter(f"no labelled trace of program {wanted!r} in {traces} to compare on (correct some "
                                 "answers with POST /v1/feedback, or lower --holdout)", param_hint="--traces")
    report = asyncio.run(compare_on(programs[0], programs[1], x, y, reward=reward))
    if not Path(after).is_file():  # a run id: its folder keeps the comparison, the review page shows it
        kept = {**report.as_dict(), "served": before, "retrained": after, "traces": str(traces), "program": wanted,
                "holdout": holdout, "reward": reward, "created": time.time()}
        atomic_write_text(_open(after, runs_dir).path / HELD_OUT_FILE, json.dumps(kept, indent=1))
    if as_json:
        console.print_json(json.dumps(report.as_dict()))
        return
    table = Table("program", "source", "reward", f"{report.before.interval().level:.0%} interval", box=None)
    for label, source, evaluation in (("served", before, report.before), ("retrained", after, report.after)):
        interval = evaluation.interval()
        table.add_row(label, source, f"{interval.mean:.3f}", f"[{interval.low:.3f}, {interval.high:.3f}]")
    console.print(f"{len(x)} held-out traces of {wanted!r} (newest {holdout:.0%} of the labelled ones)"
                  if holdout else f"{len(x)} labelled traces of {wanted!r}", markup=False)
    console.print(table)
    console.print(f"retrained - served: {report.test}", markup=False, soft_wrap=True)


def _program_file(name: str, runs_dir: Optional[Path]) -> Path:
    """A program file as given, or a run's best program."""
    if Path(name).is_file():
        return Path(name)
    run = _open(name, runs_dir)
    best = run.path / "best_program.json"
    if not best.is_file():
        raise typer.BadParameter(f"run {run.id} has no best_program.json (status: {_status(run).get('status')})")
    return best
