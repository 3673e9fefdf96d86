"""Where the review page reads runs from: the ``RunsSource`` protocol.

The run folder readers (``run.json``, a killed run's real status, ``events.jsonl``
with its torn last line) live with the CLI that writes the folders; ``promptgym ui``
hands the page an adapter over them (``promptgym.cli.commands.ui.FolderRuns``), so the
page never parses those files a second way.

    class OneRun:
        def runs(self): return [{"id": "r1", "name": "demo", "status": "completed"}]
        def status(self, run_id): return self.runs()[0]
        def events(self, run_id): return []
        def path(self, run_id): return Path("runs/r1")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class UnknownRunError(LookupError):
    """No run with that id (or more than one matches a short id)."""


class RunsSource(Protocol):
    def runs(self) -> list[dict[str, Any]]:
        """Every run's status (``run.json`` with its effective ``status``), newest first."""

    def status(self, run_id: str) -> dict[str, Any]:
        """One run's status; :class:`UnknownRunError` if there is no such run."""

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's events so far (complete lines only)."""

    def path(self, run_id: str) -> Path:
        """The run's folder (``history.csv``, ``candidates.json``, checkpoints...)."""
