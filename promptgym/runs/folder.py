"""Run folders: ``runs/<id>/`` with status, resolved config, events, history, checkpoints and artifacts.

    run = RunFolder.create(runs_dir, "arithmetic")
    run.append_event({"event": "train_begin", ...})   # through its EventLog (events.jsonl)
    run.update_status(status="running")               # through its StatusFile (run.json)

The layout and the formats are in docs/runs.md.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from promptgym.core.atomic import atomic_write_text
from promptgym.runs.checkpoints import usable_checkpoint
from promptgym.runs.events import EventLog
from promptgym.runs.process_identity import is_same_process
from promptgym.runs.status import TERMINAL, StatusFile

__all__ = ["RUNS_DIR_ENV", "SESSION_CALLS", "TERMINAL", "RunFolder", "default_runs_dir", "list_runs", "new_run_id",
           "process_alive", "run_process_state"]
SESSION_CALLS = "session_lm_calls"
RUNS_DIR_ENV = "PROMPTGYM_RUNS_DIR"


def default_runs_dir() -> Path:
    return Path(os.environ.get(RUNS_DIR_ENV) or Path.cwd() / "runs")


def new_run_id(name: str) -> str:
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:32] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{secrets.token_hex(2)}"


@dataclass
class RunFolder:
    path: Path
    stamp: Callable[[], dict[str, Any]] | None = field(default=None, compare=False, repr=False)
    """Extra keys for every event this process appends (the session's LM calls so far), so that a
    killed session's totals can be read back from the log."""

    @classmethod
    def create(cls, runs_dir: Path, name: str, run_id: str | None = None) -> "RunFolder":
        """A new run folder; ``run_id`` (a submitted job's) may take over its own ``submitted`` record."""
        path = runs_dir / (run_id or new_run_id(name))
        if run_id and (path / "run.json").is_file() and cls(path).status().get("status") == "submitted":
            cls(path).update_status(status="created")
            return cls(path)
        (path / "checkpoints").mkdir(parents=True)
        return cls.started(path, name)

    @classmethod
    def at(cls, path: Path, name: str) -> "RunFolder":
        """The run folder at exactly ``path`` (a library ``fit(run_dir=...)``'s): opened, or made when new."""
        if (path / "run.json").is_file():
            return cls(path)
        (path / "checkpoints").mkdir(parents=True, exist_ok=True)
        return cls.started(path, name)

    @classmethod
    def started(cls, path: Path, name: str) -> "RunFolder":
        """The first status record of a new run in ``path``."""
        run = cls(path)
        run.write_status({"id": path.name, "name": name, "status": "created", "created": time.time()})
        return run

    @classmethod
    def open(cls, runs_dir: Path, run_id: str) -> "RunFolder":
        path = runs_dir / run_id
        if not (path / "run.json").is_file():
            matches = sorted(p for p in runs_dir.glob(f"*{run_id}*") if (p / "run.json").is_file()) if runs_dir.is_dir() else []
            if len(matches) != 1:
                raise FileNotFoundError(f"no run {run_id!r} in {runs_dir}" + (f" ({len(matches)} match)" if matches else ""))
            path = matches[0]
        return cls(path)

    @property
    def id(self) -> str:
        return self.path.name

    # -- files ----------------------------------------------------------------------------

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def last_checkpoint(self) -> Path:
        return self.path / "checkpoints" / "last.json"

    @property
    def status_file(self) -> StatusFile:
        return StatusFile(self.path / "run.json")

    @property
    def log(self) -> EventLog:
        return EventLog(self.events_path, self.stamp)

    def status(self) -> dict[str, Any]:
        return self.status_file.read()

    def write_status(self, data: dict[str, Any]) -> None:
        self.status_file.write(data)

    def update_status(self, **changes: Any) -> dict[str, Any]:
        return self.status_file.update(**changes)

    def write_text(self, name: str, text: str) -> Path:
        return atomic_write_text(self.path / name, text)

    def append_event(self, event: dict[str, Any]) -> None:
        """One JSON line, appended and flushed (the log is never rewritten)."""
        self.log.append_event(event)

    def events(self) -> list[dict[str, Any]]:
        return list(self.iter_events())

    def iter_events(self, start: int = 0) -> Iterator[dict[str, Any]]:
        """The events from line ``start`` on (0-based); a line that is not JSON is skipped with a warning."""
        events, _ = self.read_events(start)
        yield from events

    def read_events(self, start: int = 0,
                    on_bad_line: Callable[[int, str], None] | None = None) -> tuple[list[dict[str, Any]], int]:
        """See :meth:`EventLog.read`."""
        return self.log.read(start, on_bad_line)

    def usable_checkpoint(self) -> tuple[Path | None, str]:
        """The checkpoint a prompt-learning run resumes from, and a note when it isn't ``last.json``."""
        return usable_checkpoint(self.path / "checkpoints")

    def session_totals(self) -> list[dict[str, float]]:
        """Each session's time and LM calls, from the event log (a killed session's too).

        A session starts at a ``run_started`` event and lasts until its last event; its LM calls are
        the last count stamped on its events.
        """
        sessions: list[dict[str, float]] = []
        for event in self.iter_events():
            if event.get("event") == "run_started" or not sessions:
                sessions.append({"started": event.get("time", 0.0), "elapsed_s": 0.0, "lm_calls": 0})
            current = sessions[-1]
            current["elapsed_s"] = max(current["elapsed_s"], float(event.get("time", 0.0)) - current["started"])
            if isinstance(event.get(SESSION_CALLS), int):
                current["lm_calls"] = max(current["lm_calls"], event[SESSION_CALLS])
        return sessions


def list_runs(runs_dir: Path, unreadable: list[tuple[Path, str]] | None = None) -> list[dict[str, Any]]:
    """Status of every run, newest first; a run whose run.json can't be read is left out and, when
    ``unreadable`` is given, appended to it as (folder, why)."""
    if not runs_dir.is_dir():
        return []
    found = []
    for path in runs_dir.iterdir():
        if (path / "run.json").is_file():
            try:
                status = RunFolder(path).status()
            except (ValueError, OSError) as error:
                status = f"{type(error).__name__}: {error}"
            if isinstance(status, dict) and isinstance(status.get("id"), str):
                found.append(status)
            elif unreadable is not None:
                unreadable.append((path, status if isinstance(status, str) else "run.json is not a run's status object"))
    return sorted(found, key=lambda status: status.get("created", 0) if isinstance(status.get("created"), (int, float))
                  else 0, reverse=True)


def process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def run_process_state(status: dict[str, Any]) -> str:
    """``"alive"`` when the process ``run.json`` records still runs, ``"gone"`` when it died (its pid may now be
    another program's), ``"unverified"`` for a live pid recorded without its identity (an older promptgym)."""
    pid = status.get("pid")
    if not process_alive(pid):
        return "gone"
    recorded = status.get("process")
    if recorded is None:
        return "unverified"
    return "alive" if isinstance(recorded, dict) and recorded.get("pid") == pid and is_same_process(recorded) else "gone"
