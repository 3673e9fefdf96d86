"""``History``: what ``fit()`` returns, one list per key, one entry per epoch."""

from __future__ import annotations

from typing import Any

from promptgym.core.events import Event
from promptgym.stats import Interval
from promptgym.training.callback import Callback


class History(Callback):
    """Keras-style: ``history.history["val_reward"][epoch]``, ``history.epoch``.

    ``history.intervals["val_reward"][epoch]`` is the 95% confidence interval
    (a :class:`promptgym.stats.Interval`) of that epoch's validation score, or
    None for an epoch without a validation pass. ``history.comparisons`` lists
    each check of the optimizer's best against the starting program (scores,
    intervals, paired test, whether it was kept).
    """

    def __init__(self) -> None:
        super().__init__()
        self.comparisons: list[dict[str, Any]] = []
        """Every validation check of a best candidate against the start: both scores with their
        intervals, the paired test, ``accepted`` and the ``stage`` (see :mod:`promptgym.optimizers.selection`)."""
        self.history: dict[str, list[Any]] = {}
        self.intervals: dict[str, list[Interval | None]] = {}
        self.epoch: list[int] = []
        self.pending_intervals: dict[str, Interval] = {}
        """The trainer's intervals for the epoch about to end (taken by ``on_epoch_end``)."""
        self.spend: dict[str, Any] = {}
        """The whole run's spend when it ended (``cost_usd``, by phase, ``saved_usd``, ``unpriced_calls``,
        ``compute_s``), ``limit_usd`` and ``capped`` (stopped by ``max_usd``): a capped run's last partial
        epoch has no History row, but its dollars are here."""

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch.append(epoch)
        logs = logs or {}
        for key in set(self.history) | set(logs):
            series = self.history.setdefault(key, [None] * (len(self.epoch) - 1))
            series.append(logs.get(key))
        for key in set(self.intervals) | set(self.pending_intervals):
            series = self.intervals.setdefault(key, [None] * (len(self.epoch) - 1))
            series.append(self.pending_intervals.get(key))
        self.pending_intervals = {}

    def on_event(self, event: Event) -> None:
        comparison = event.get("comparison") if event.kind in ("candidate_accepted", "candidate_rejected") else None
        if comparison:
            self.comparisons.append(dict(comparison))

    def as_rows(self) -> list[dict[str, Any]]:
        return [{"epoch": epoch, **{key: values[i] for key, values in self.history.items()}}
                for i, epoch in enumerate(self.epoch)]

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
