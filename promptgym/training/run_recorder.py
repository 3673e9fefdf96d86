"""The run's one consumer of trainer events: events.jsonl, checkpoints, history.csv, live listeners."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable

from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.core.events import CheckpointSaved, Event, StepEnd, TrainBegin, TrainEnd, as_record
from promptgym.programs.program import Program
from promptgym.training.callback import Callback
from promptgym.training.callbacks_builtin import CSVLogger
from promptgym.runs.checkpoints import write_checkpoint

Listener = Callable[[dict[str, Any]], None]


def clean(value: Any) -> Any:
    """JSON-safe: NaN becomes None, numpy scalars become floats."""
    if isinstance(value, dict):
        return {key: clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(item) for item in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


class RunRecorder(Callback):
    """Writes every event (masked) to ``events.jsonl`` and forwards it to listeners; checkpoints each epoch."""

    def __init__(self, run: RunFolder, masker: Masker, listeners: list[Listener] | None = None) -> None:
        super().__init__()
        self.run = run
        self.masker = masker
        self.listeners = list(listeners or [])
        self.history = CSVLogger(run.path / "history.csv", append=True)
        self.steps = 1
        self.epoch = 0

    def emit(self, event: Event) -> None:
        record = self.masker.mask_data(clean(as_record(event)))
        self.run.append_event(record)
        for listener in self.listeners:
            listener({"time": time.time(), **record})

    def set_program(self, program: Program) -> None:
        super().set_program(program)
        self.history.set_program(program)

    # -- trainer hooks --------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        if isinstance(event, TrainBegin):
            self.steps = max(1, event.steps)
        if isinstance(event, TrainEnd):
            event = TrainEnd()  # the history is in history.csv
        self.emit(event)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.history.on_train_begin(logs)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        # After every step, so a kill loses at most the step in flight (the file holds the trainer's position).
        write_checkpoint(self.program, self.run.last_checkpoint)
        self.emit(StepEnd(epoch=self.epoch, step=batch, global_step=self.epoch * self.steps + batch + 1,
                          reward=logs.get("reward")))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.history.on_epoch_end(epoch, clean(logs or {}))
        path = self.save_checkpoint(f"epoch_{epoch + 1}")
        self.run.update_status(epochs_done=epoch + 1)
        self.emit(CheckpointSaved(path=str(path.relative_to(self.run.path)), epoch=epoch))

    def save_checkpoint(self, name: str) -> Path:
        """The program with its optimizer state, as ``checkpoints/<name>.json`` and ``last.json``."""
        path = write_checkpoint(self.program, self.run.path / "checkpoints" / f"{name}.json")
        write_checkpoint(self.program, self.run.last_checkpoint)
        return path
