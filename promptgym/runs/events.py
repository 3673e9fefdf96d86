"""``events.jsonl``: a run's typed events, one JSON object a line, appended and never rewritten.

    log = EventLog(folder / "events.jsonl")
    writer = EventWriter(log)                    # the run's one writer: JSON-safe, masked, then to listeners
    writer.emit(RunStarted(run_id="r1", resume=False))
    events, next_line = log.read(0)              # complete lines only; a broken line is reported and skipped

Every event kind and its payload is in ``promptgym.core.events``; the file's format is in docs/runs.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from promptgym.core.events import Event, as_record

logger = logging.getLogger("promptgym")

Listener = Callable[[dict[str, Any]], None]
"""Receives each event record as it is written (the live renderer, the ``[logging]`` loggers)."""


class Masking(Protocol):
    """What hides secrets in what a run writes (the CLI's ``Masker``)."""

    def mask(self, text: str) -> str: ...

    def mask_data(self, value: Any) -> Any: ...


class NoMasking:
    """Nothing to hide: a library ``fit(run_dir=...)`` has no secrets file."""

    def mask(self, text: str) -> str:
        return text

    def mask_data(self, value: Any) -> Any:
        return value


def clean(value: Any) -> Any:
    """JSON-safe: NaN becomes None, numpy scalars become numbers.

    >>> clean({"reward": float("nan"), "scores": (1, 2)})
    {'reward': None, 'scores': [1, 2]}
    """
    if isinstance(value, dict):
        return {key: clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(item) for item in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


class EventLog:
    """The ``events.jsonl`` file: append one record, read the complete lines from a line on.

    ``stamp`` adds keys to every line this process appends (the session's LM calls so far, so that a killed
    session's totals can be read back from the log).
    """

    def __init__(self, path: Path, stamp: Callable[[], dict[str, Any]] | None = None) -> None:
        self.path, self.stamp = path, stamp

    def append_event(self, record: dict[str, Any]) -> None:
        """One JSON line with its ``time``, appended and flushed."""
        stamped = {"time": round(time.time(), 3), **record, **(self.stamp() if self.stamp else {})}
        line = json.dumps(stamped, ensure_ascii=False, default=str)
        with self.path.open("ab") as handle:
            if handle.tell() and not _ends_with_newline(self.path):
                handle.write(b"\n")  # a session killed mid-write left half a line: never glue this event to it
            handle.write((line + "\n").encode("utf-8"))
            handle.flush()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.read()[0])

    def read(self, start: int = 0,
             on_bad_line: Callable[[int, str], None] | None = None) -> tuple[list[dict[str, Any]], int]:
        """The complete lines' events from line ``start`` on (0-based), and the line to read from next time.

        A line that is not a JSON object (a disk error, a hand edit) is reported through
        ``on_bad_line(line_number, text)`` (1-based; default: a logged warning) and skipped.
        """
        if not self.path.is_file():
            return [], start
        report = on_bad_line or (lambda number, text: logger.warning(
            "%s line %d is not a JSON event; skipped: %.80r", self.path, number, text))
        events, next_line = [], start
        with self.path.open(encoding="utf-8", errors="replace") as handle:
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


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


class Appends(Protocol):
    """Where an :class:`EventWriter` appends (an :class:`EventLog`, or the ``RunFolder`` that holds one)."""

    def append_event(self, record: dict[str, Any]) -> None: ...


class EventWriter:
    """The run's one writer of events: each typed event, JSON-safe and masked, to the log, then to listeners."""

    def __init__(self, log: Appends, masker: Masking | None = None, listeners: list[Listener] | None = None) -> None:
        self.log, self.masker = log, masker or NoMasking()
        self.listeners = list(listeners or [])

    def emit(self, event: Event) -> None:
        self.write(as_record(event))

    def write(self, record: dict[str, Any]) -> None:
        """An event record (``{"event": kind, ...}``), as :meth:`emit` writes it."""
        record = self.masker.mask_data(clean(record))
        self.log.append_event(record)
        for listener in self.listeners:
            listener({"time": time.time(), **record})

    __call__ = emit
