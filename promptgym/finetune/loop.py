"""Pieces every weight-training loop shares: optimiser and schedule, stop requests, event sinks.

    optimizer, scheduler = make_optimizer(model, settings, total_steps)
    with stop_on_signals() as stop:
        ...
        if stop.requested:
            save_checkpoint(...); raise TrainingInterrupted(step)

Ctrl-C or SIGTERM asks the loop to stop after the current step, with a checkpoint; a second Ctrl-C
stops at once (losing the steps since the last checkpoint).
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from promptgym.core.atomic import atomic_write_json, read_json
from promptgym.core.events import Event
from promptgym.finetune.settings import WeightTrainingSettings

EventSink = Callable[[Event], None]
"""Receives each typed event (``promptgym.core.events``); the CLI writes them to the run's events.jsonl."""


def ignore_event(event: Event) -> None:
    """The default sink: events are dropped."""


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


def make_optimizer(model: Any, settings: WeightTrainingSettings, total_steps: int) -> tuple[Any, Any]:
    """AdamW on the trainable parameters, and a linear schedule with warm-up (``warmup_ratio`` of the steps)."""
    import torch  # deferred: heavy, loaded when a job runs
    from transformers import get_linear_schedule_with_warmup

    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    warmup = math.ceil(total_steps * settings.warmup_ratio)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, max(total_steps, 1))


class JsonStatus:
    """A status file updated by merging keys, atomically (the CLI's run.json has the same shape)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, Any]:
        return read_json(self.path) if self.path.is_file() else {}

    def __call__(self, **changes: Any) -> dict[str, Any]:
        data = {**self.read(), **changes}
        atomic_write_json(self.path, json.loads(json.dumps(data, default=str)))
        return data


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
