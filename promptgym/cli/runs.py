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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from promptgym.core.atomic import atomic_write_json, atomic_write_text, read_json

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
        line = json.dumps({"time": round(time.time(), 3), **event}, ensure_ascii=False, default=str)
        with self.events_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()

    def events(self) -> list[dict[str, Any]]:
        return list(self.iter_events())

    def iter_events(self, start: int = 0) -> Iterator[dict[str, Any]]:
        if not self.events_path.is_file():
            return
        with self.events_path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                if number >= start and line.endswith("\n") and line.strip():
                    yield json.loads(line)


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """Status of every run, newest first."""
    if not runs_dir.is_dir():
        return []
    found = []
    for path in runs_dir.iterdir():
        if (path / "run.json").is_file():
            try:
                found.append(RunFolder(path).status())
            except (ValueError, OSError):
                continue
    return sorted(found, key=lambda status: status.get("created", 0), reverse=True)


def process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
