"""A callback that is also an event sink, so one logger serves every flow.

``fit()`` calls ``on_event(event)``; the SFT and RL flows (``run_sft(job, ..., on_event=logger)``, ``rl_job.run(...)``)
and the CLI's run listeners call the logger itself, with an event or its ``events.jsonl`` record.
"""

from __future__ import annotations

from typing import Any, Mapping

from promptgym.core.events import Event, StepEnd, TrainBegin, from_record
from promptgym.training.callback import Callback


class EventSinkCallback(Callback):
    """Subclasses implement ``on_event``; calling the instance routes events and records to it.

    Under ``fit()`` the end of each step arrives as a hook, not an event: it is turned into the
    :class:`StepEnd` event the CLI's run folder records, so both ways log the same step scalars.
    """

    def __init__(self) -> None:
        super().__init__()
        self._steps_per_epoch = 1
        self._epoch = 0

    def __call__(self, item: Event | Mapping[str, Any]) -> None:
        event = item if isinstance(item, Event) else from_record(item)
        if event is not None:
            self.on_event(event)

    def _track(self, event: Event) -> None:
        """Subclasses call this first in ``on_event``: it learns the steps per epoch."""
        if isinstance(event, TrainBegin):
            self._steps_per_epoch = max(1, event.steps)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.on_event(StepEnd(epoch=self._epoch, step=batch, global_step=self._epoch * self._steps_per_epoch + batch + 1,
                              reward=(logs or {}).get("reward")))
