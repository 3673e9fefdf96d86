"""``History``: what ``fit()`` returns, one list per key, one entry per epoch."""

from __future__ import annotations

from typing import Any

from promptgym.training.callback import Callback


class History(Callback):
    """Keras-style: ``history.history["val_reward"][epoch]``, ``history.epoch``."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[Any]] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch.append(epoch)
        logs = logs or {}
        for key in set(self.history) | set(logs):
            series = self.history.setdefault(key, [None] * (len(self.epoch) - 1))
            series.append(logs.get(key))

    def as_rows(self) -> list[dict[str, Any]]:
        return [{"epoch": epoch, **{key: values[i] for key, values in self.history.items()}}
                for i, epoch in enumerate(self.epoch)]

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
