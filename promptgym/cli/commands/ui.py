"""``promptgym ui``: the review page (runs and served traces) on this machine.

    promptgym ui                                     # http://127.0.0.1:8765, runs from ./runs
    promptgym ui --traces served/ --api-key-env UI_KEY --port 9000
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

import typer

from promptgym.cli.commands.runs import effective_status
from promptgym.cli.commands.serve import LOCAL_HOSTS, MAX_CONNECTIONS, READ_TIMEOUT_S, run_uvicorn, uvicorn_config
from promptgym.cli.common import fail
from promptgym.runs.folder import RunFolder, default_runs_dir, list_runs


class FolderRuns:
    """The page's :class:`promptgym.ui.sources.RunsSource` over a runs folder, through the CLI's own readers
    (``runs list``'s statuses, a killed run shown as stopped, events with a torn last line left for later)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._events: dict[Path, tuple[int, int, list[dict[str, Any]]]] = {}
        """Per run: (lines read, file size then, their events): a page polling a live run every 2 s parses
        only the lines added since (the log is append-only)."""
        self._lock = threading.Lock()

    def _open(self, run_id: str) -> RunFolder:
        from promptgym.ui.sources import UnknownRunError  # deferred with the rest of the page (fastapi)

        try:
            return RunFolder.open(self.folder, run_id)
        except FileNotFoundError as error:
            raise UnknownRunError(str(error)) from None

    def runs(self) -> list[dict[str, Any]]:
        unreadable: list[tuple[Path, str]] = []
        found = [{**status, "status": effective_status(status, RunFolder(self.folder / status["id"]))}
                 for status in list_runs(self.folder, unreadable)]
        # `runs list` names the folders it could not read; the page lists them too, with why.
        return found + [{"id": path.name, "status": "unreadable", "error": f"run.json can't be read: {problem}"}
                        for path, problem in unreadable]

    def status(self, run_id: str) -> dict[str, Any]:
        from promptgym.ui.sources import UnknownRunError  # deferred with the rest of the page (fastapi)

        run = self._open(run_id)
        try:
            status = run.status()
        except (OSError, ValueError) as error:
            raise UnknownRunError(f"{run.path / 'run.json'} can't be read: {error}") from None
        if not isinstance(status, dict):
            raise UnknownRunError(f"{run.path / 'run.json'}: expected a JSON object, got {type(status).__name__}")
        return {**status, "id": run.id, "status": effective_status(status, run)}

    def events(self, run_id: str) -> list[dict[str, Any]]:
        run = self._open(run_id)
        size = run.events_path.stat().st_size if run.events_path.is_file() else 0
        with self._lock:
            start, seen_size, known = self._events.get(run.path, (0, 0, []))
            if size < seen_size:  # replaced (a run folder removed and made again): read it all
                start, known = 0, []
            new, next_line = run.read_events(start)
            known = known + new
            self._events[run.path] = (next_line, size, known)
        return known

    def path(self, run_id: str) -> Path:
        return self._open(run_id).path


def trace_store_path(given: Path) -> Path:
    """``--traces``: a folder ``serve --record`` wrote (its ``traces.db``) or the database file itself."""
    from promptgym.serving.recording import STORE_FILE  # deferred with the rest of the server (fastapi)

    path = given / STORE_FILE if given.is_dir() else given
    if not path.is_file():
        fail(f"--traces {given}: no trace store there (expected a folder holding {STORE_FILE}, as "
             f"`promptgym serve --record DIR` writes, or the .db file itself)")
    return path


def ui_command(
    runs_dir: Optional[Path] = typer.Option(None, "--runs", help="Run folders to show (default ./runs, or "
                                            "$PROMPTGYM_RUNS_DIR)."),
    traces: Optional[Path] = typer.Option(None, "--traces", metavar="DIR_OR_DB",
                                          help="A trace store: the folder given to `serve --record`, or its .db file."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on: this machine only."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0: any free port, printed at start)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="NAME",
                                              help="Require the key held by this environment variable, as serve "
                                                   "does (the page asks for it once per tab)."),
) -> None:
    """Review runs (curves, prompts before and after, comparisons) and served traces (rate, correct)."""
    # Deferred: fastapi and uvicorn load only for this command, not for every CLI call.
    from promptgym.serving.auth import MissingKeyEnvironment, api_key_from_env
    from promptgym.traces import TraceStore
    from promptgym.ui import create_ui_app

    if host not in LOCAL_HOSTS:
        fail(f"--host {host}: the review page shows served inputs and outputs (personal data) and listens on this "
             f"machine only ({', '.join(LOCAL_HOSTS)}); reach it from elsewhere through an SSH tunnel")
    try:
        api_key = api_key_from_env(api_key_env)
    except MissingKeyEnvironment as error:
        fail(str(error))
    store = None
    if traces is not None:
        try:
            store = TraceStore(trace_store_path(traces))
        except ValueError as error:
            fail(f"--traces {traces}: {error}")
    folder = runs_dir or default_runs_dir()
    app = create_ui_app(FolderRuns(folder), store, api_key=api_key)
    described = [f"  runs: {folder}" + ("" if folder.is_dir() else " (not there yet: no runs to show)"),
                 f"  traces: {store.path if store else '(none; start with --traces DIR)'}",
                 "  key: " + (f"required (${api_key_env})" if api_key else "none (anyone on this machine can open it)")]
    try:
        run_uvicorn(uvicorn_config(app, 5.0, READ_TIMEOUT_S, MAX_CONNECTIONS), host, port, described=described)
    finally:
        if store is not None:
            store.close()
