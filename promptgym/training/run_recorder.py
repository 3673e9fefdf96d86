"""The run folder's consumer of trainer events under ``fit()``: checkpoints, history.csv, and every event
through the run's one event writer (events.jsonl and the live listeners).

    session = RunAttempt(run, masker, listeners, job_type="prompt_learning", resume=False)
    recorder = RunRecorder(run, session.events)
    await program.fit(x, y, callbacks=[recorder])   # what fit(run_dir=...) does itself
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promptgym.core.events import CheckpointSaved, Event, StepEnd, TrainBegin, TrainEnd
from promptgym.runs.checkpoints import write_checkpoint
from promptgym.runs.events import EventWriter, clean
from promptgym.runs.folder import RunFolder
from promptgym.training.callback import Callback
from promptgym.training.callbacks_builtin import CSVLogger

__all__ = ["RunRecorder"]


class RunRecorder(Callback):
    """Writes every event to the run's ``events`` writer; checkpoints after each step and epoch; history.csv."""

    def __init__(self, run: RunFolder, events: EventWriter) -> None:
        super().__init__()
        self.run, self.events = run, events
        self.history = CSVLogger(run.path / "history.csv", append=True)
        self.steps = 1
        self.epoch = 0

    def emit(self, event: Event) -> None:
        self.events.emit(event)

    def set_program(self, program: Any) -> None:
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

