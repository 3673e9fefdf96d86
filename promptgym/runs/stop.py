"""Stop requests: a flag the loop checks between steps, set by Ctrl-C / SIGTERM (or a time budget, a test).

    with stop_on_signals() as stop:
        for step in steps:
            ...
            if stop.requested:
                save_checkpoint(...); raise TrainingInterrupted(step, path)

Ctrl-C or SIGTERM asks the loop to stop after the current step, with a checkpoint; a second Ctrl-C
stops at once (losing the steps since the last checkpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from pathlib import Path
from typing import Any, Iterator


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on request after a checkpoint; resume continues from it."""

    def __init__(self, step: int, checkpoint: Path | None) -> None:
        super().__init__(f"stopped after step {step}" + (f"; checkpoint {checkpoint}" if checkpoint else ""))
        self.step = step
        self.checkpoint = checkpoint


class StopRequest:
    """A flag the loop checks between steps."""

    def __init__(self) -> None:
        self.requested = False
        self.reason = ""

    def request(self, reason: str = "requested") -> None:
        self.requested, self.reason = True, reason


class CancellingStop(StopRequest):
    """A stop request that also cancels an asyncio task (from a signal handler, so through the loop)."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        super().__init__()
        self.task = task

    def request(self, reason: str = "requested") -> None:
        super().request(reason)
        self.task.get_loop().call_soon_threadsafe(self.task.cancel)


@contextlib.contextmanager
def stop_on_signals(stop: StopRequest | None = None) -> Iterator[StopRequest]:
    """SIGINT/SIGTERM set ``stop.requested``; a second SIGINT raises KeyboardInterrupt. Main thread only."""
    stop = stop or StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: Any) -> None:
        if stop.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.request("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C")

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
