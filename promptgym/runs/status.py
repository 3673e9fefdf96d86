"""``run.json``: a run's status, one JSON object updated by merging keys; the only code that writes it.

    status = StatusFile(folder / "run.json")
    status.update(status="running", steps_done=0)   # merged into what is there, atomically, stamped "updated"
    status.read()["status"]                          # 'running'

Prompt learning, the weight runs and the CLI all write through it, so the file has one shape (docs/runs.md).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from promptgym.core.atomic import atomic_write_json, read_json

TERMINAL = ("completed", "failed", "interrupted")
"""Statuses a session ends in (``stopped_by_budget`` too, which ``--resume`` goes on from)."""


class StatusFile:
    """The status file at ``path``; calling it is :meth:`update` (what a weight run's ``status=`` sink takes)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, Any]:
        """The status (``{}`` before the first write); a file that is not JSON raises ValueError naming it."""
        return read_json(self.path) if self.path.is_file() else {}

    def write(self, data: dict[str, Any]) -> dict[str, Any]:
        """Replace the whole status (a new run's first record); returns it as stored (a path as its text)."""
        stored = json.loads(json.dumps(data, default=str))
        atomic_write_json(self.path, stored)
        return stored

    def update(self, **changes: Any) -> dict[str, Any]:
        """Merge ``changes`` into the status and stamp ``updated``; returns the new status, as stored."""
        return self.write({**self.read(), **changes, "updated": time.time()})

    __call__ = update
