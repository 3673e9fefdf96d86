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


def make_optimizer(model: Any, settings: WeightTrainingSettings, total_steps: int) -> tuple[Any, Any]:
    """AdamW on the trainable parameters, and a linear schedule with warm-up (``warmup_ratio`` of the steps)."""
    import torch  # deferred: heavy, loaded when a job runs
    from transformers import get_linear_schedule_with_warmup

    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    warmup = math.ceil(total_steps * settings.warmup_ratio)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, max(total_steps, 1))


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
