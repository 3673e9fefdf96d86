"""Pieces every weight-training loop shares: optimiser and schedule, event sinks, peak memory.

    optimizer, scheduler = make_optimizer(model, settings, total_steps)

Stop requests and signals are the run skeleton's (:mod:`promptgym.runs.stop`), as is the status file
(:mod:`promptgym.runs.status`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from promptgym.core.events import Event
from promptgym.finetune.settings import WeightTrainingSettings
from promptgym.runs.stop import StopRequest, TrainingInterrupted

__all__ = ["EventSink", "StopRequest", "TrainingInterrupted", "ignore_event", "make_optimizer", "peak_rss_mb"]
# StopRequest, TrainingInterrupted: the run skeleton's (promptgym.runs.stop), importable here as before

EventSink = Callable[[Event], None]
"""Receives each typed event (``promptgym.core.events``); the CLI writes them to the run's events.jsonl."""


def ignore_event(event: Event) -> None:
    """The default sink: events are dropped."""


def make_optimizer(model: Any, settings: WeightTrainingSettings, total_steps: int | Callable[[], int]) -> tuple[Any, Any]:
    """AdamW on the trainable parameters, and a linear schedule with warm-up (``warmup_ratio`` of the steps).

    ``total_steps`` may be a callable, read at every step: a run that plans its length after its first
    steps (``n_epochs="auto"``) decays the rate to its planned end, not to a guess made before it started.
    """
    import torch  # deferred: heavy, loaded when a job runs

    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    total = total_steps if callable(total_steps) else (lambda: total_steps)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: linear_rate(step, total(), settings.warmup_ratio))


def linear_rate(step: int, total_steps: int, warmup_ratio: float) -> float:
    """The learning-rate factor at ``step``: up from 0 over the warm-up, then linearly down to 0 at the end
    (transformers' ``get_linear_schedule_with_warmup``).

    >>> [round(linear_rate(step, 10, 0.2), 3) for step in (0, 1, 2, 6, 10)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    total = max(total_steps, 1)
    warmup = math.ceil(total * warmup_ratio)
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
