"""Run folders: ``runs/<id>/`` with status, resolved config, events and artifacts.

    run = RunFolder.create(runs_dir, "arithmetic")
    run.append_event({"event": "train_begin", ...})
    run.update_status(status="running")
"""

from __future__ import annotations

import json
import os
import secrets
import time
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from promptgym.runs.process_identity import is_same_process
from promptgym.core.atomic import atomic_write_json, atomic_write_text, read_json

logger = logging.getLogger("promptgym")
SESSION_CALLS = "session_lm_calls"

TERMINAL = ("completed", "failed", "interrupted")
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

    def status(self) -> dict[str, Any]:
        return read_json(self.path / "run.json")

    def write_status(self, data: dict[str, Any]) -> None:
        atomic_write_json(self.path / "run.json", data)

    def update_status(self, **changes: Any) -> dict[str, Any]:
        data = {**self.status(), **changes, "updated": time.time()}
        self.write_status(data)
        return data

    def write_text(self, name: str, text: str) -> Path:
        return atomic_write_text(self.path / name, text)

    def append_event(self, event: dict[str, Any]) -> None:
        """One JSON line, appended and flushed (the log is never rewritten)."""
        stamped = {"time": round(time.time(), 3), **event, **(self.stamp() if self.stamp else {})}
        line = json.dumps(stamped, ensure_ascii=False, default=str)
        with self.events_path.open("ab") as handle:
            if handle.tell() and not _ends_with_newline(self.events_path):
                handle.write(b"\n")  # a session killed mid-write left half a line: never glue this event to it
            handle.write((line + "\n").encode("utf-8"))
            handle.flush()

    def events(self) -> list[dict[str, Any]]:
        return list(self.iter_events())

    def iter_events(self, start: int = 0) -> Iterator[dict[str, Any]]:
        """The events from line ``start`` on (0-based); a line that is not JSON is skipped with a warning."""
        events, _ = self.read_events(start)
        yield from events

    def read_events(self, start: int = 0,
                    on_bad_line: Callable[[int, str], None] | None = None) -> tuple[list[dict[str, Any]], int]:
        """The complete lines' events from line ``start`` on, and the line to read from next time.

        A line that is not a JSON object (a disk error, a hand edit) is reported through
        ``on_bad_line(line_number, text)`` (1-based; default: a logged warning) and skipped.
        """
        if not self.events_path.is_file():
            return [], start
        report = on_bad_line or (lambda number, text: logger.warning(
            "%s line %d is not a JSON event; skipped: %.80r", self.events_path, number, text))
        events, next_line = [], start
        with self.events_path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle):
                if number < start:
                    continue
                if not line.endswith("\n"):
                    break  # being written: read it next time
                next_line = number + 1
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = None
                if isinstance(event, dict):
                    events.append(event)
                else:
                    report(number + 1, line.strip())
        return events, next_line

    def usable_checkpoint(self) -> tuple[Path | None, str]:
        """The checkpoint to resume from, and a note when it isn't ``last.json``.

        ``last.json`` when it reads as a program file; else the newest other checkpoint that does
        (``epoch_N.json``, ``interrupted.json``); else None.
        """
        def readable(path: Path) -> bool:
            try:
                data = read_json(path)
            except (OSError, ValueError):
                return False
            return isinstance(data, dict) and isinstance(data.get("variables"), dict)

        if readable(self.last_checkpoint):
            return self.last_checkpoint, ""
        problem = "is missing" if not self.last_checkpoint.exists() else "can't be read"
        others = sorted((path for path in (self.path / "checkpoints").glob("*.json") if path != self.last_checkpoint),
                        key=lambda path: path.stat().st_mtime, reverse=True)
        for path in others:
            if readable(path):
                return path, f"checkpoints/last.json {problem}; resuming from {path.relative_to(self.path)}, the newest readable checkpoint"
        return None, f"checkpoints/last.json {problem} and no other checkpoint can be read; starting again from epoch 1"

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


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


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
