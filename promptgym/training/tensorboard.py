"""``TensorBoard``: scalars per step for prompt learning, SFT and RL, in a TensorBoard log folder.

    await program.fit(x, y, callbacks=[callbacks.TensorBoard(log_dir="logs/dates")])
    run_sft(sft_job, "out", on_event=callbacks.TensorBoard(log_dir="logs/sft"))
    # tensorboard --logdir logs

Tags (``train/step_reward``, ``epoch/val_reward``, ``sft/loss``, ``rl/mean_reward``, ...) are
those of :mod:`promptgym.training.scalars`. Written with tensorboardX (no TensorFlow needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from promptgym.core.events import Event, RunFinished, RunStarted, TrainEnd
from promptgym.training.event_sink import EventSinkCallback
from promptgym.training.logger_checks import ensure_writable_folder
from promptgym.training.scalars import event_scalars


class TensorBoard(EventSinkCallback):
    """Write each event's scalars to ``log_dir`` (Keras' argument name); closed at the end of training."""

    def __init__(self, log_dir: str | Path = "logs") -> None:
        super().__init__()
        self.log_dir = str(log_dir)
        self._writer: Any = None
        self._opened = 0

    @property
    def writer(self) -> Any:
        if self._writer is None:
            try:
                from tensorboardX import SummaryWriter  # deferred: protobuf and tensorboardX load only when logging
            except ImportError:
                raise ImportError("callbacks.TensorBoard needs tensorboardX: pip install "
                                  "'promptgym[observability]'") from None
            # A writer reopened after close() (events after training ends) must not reuse the file name,
            # which tensorboardX makes from the second and the host: the suffix keeps each file apart.
            self._opened += 1
            self._writer = SummaryWriter(logdir=self.log_dir, filename_suffix=f".{os.getpid()}.{self._opened}")
        return self._writer

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Fail before the first epoch, naming the option, when ``log_dir`` can't be written."""
        ensure_writable_folder(self.log_dir, f"callbacks.TensorBoard(log_dir={self.log_dir!r})")

    def on_event(self, event: Event) -> None:
        self._track(event)
        if isinstance(event, RunStarted):  # the weight flows' start: the same check, before any step
            self.on_train_begin()
        scalars = event_scalars(event)
        if scalars is not None:
            step, values = scalars
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, global_step=step)
        if isinstance(event, (TrainEnd, RunFinished)):
            self.close()  # tensorboardX writes from a thread: only close() waits until everything is on disk

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
