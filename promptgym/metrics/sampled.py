"""Metrics over k samples of one problem: ``PassAtK``, ``PassHatK``, ``GapK`` (batch metrics).

Each update gets one problem's ``k`` sampled answers (evaluate with
``batch_size == k`` and each input repeated k times); a sample counts as
correct when ``reward`` scores it at least ``pass_threshold``. The result is
the mean over problems of the unbiased estimator for the ``n`` samples with
``c`` correct::

    pass@k = 1 - C(n - c, k) / C(n, k)      pass^k = C(c, k) / C(n, k)      gap = pass@k - pass^k
"""

from __future__ import annotations

from math import comb
from typing import Any

import numpy as np

from promptgym.core.serialization import register_builtin, serialize_object, with_objects
from promptgym.metrics.base import Metric
from promptgym.rewards.builtin import ExactMatch


class BatchMetric(Metric):
    """A metric updated with a batch of (y_true, y_pred) at once."""

    async def batch_state(self, y_true: list[Any], y_pred: list[Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def update_state(self, y_true: Any, y_pred: Any) -> None:
        if not isinstance(y_true, (list, tuple, np.ndarray)):
            y_true, y_pred = [y_true], [y_pred]
        self._state.assign(self.merge(self.state, await self.batch_state(list(y_true), list(y_pred))))

    async def example_state(self, y_true: Any, y_pred: Any) -> dict[str, Any]:
        return await self.batch_state([y_true], [y_pred])


class _Sampled(BatchMetric):
    def __init__(self, k: int = 1, reward: Any = None, pass_threshold: float = 1.0, name: str | None = None,
                 **masks: Any) -> None:
        self.k = int(k)
        self.reward = reward if reward is not None else ExactMatch()
        self.pass_threshold = pass_threshold
        super().__init__(name=name, **masks)

    def estimate(self, n: int, c: int, k: int) -> float:
        raise NotImplementedError

    async def batch_state(self, y_true: list[Any], y_pred: list[Any]) -> dict[str, Any]:
        correct = 0
        for true, pred in zip(y_true, y_pred):
            score = 0.0 if pred is None else float((await self.reward.score(true, pred)).score)
            correct += score >= self.pass_threshold
        n = len(y_true)
        return {"total": self.estimate(n, correct, max(1, min(self.k, n))) if n else 0.0, "count": 1}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "k": self.k, "pass_threshold": self.pass_threshold,
                "reward": serialize_object(self.reward)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "_Sampled":
        return cls(**with_objects(config, reward="reward"))


def _pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 if n - c < k else 1.0 - comb(n - c, k) / comb(n, k)


def _pass_hat_k(n: int, c: int, k: int) -> float:
    return comb(c, k) / comb(n, k) if c >= k else 0.0


@register_builtin
class PassAtK(_Sampled):
    """Share of problems solved in at least one of k samples."""

    default_name = "pass_at_k"

    def estimate(self, n: int, c: int, k: int) -> float:
        return _pass_at_k(n, c, k)


@register_builtin
class PassHatK(_Sampled):
    """Share of problems solved in all of k samples (consistency)."""

    default_name = "pass_hat_k"

    def estimate(self, n: int, c: int, k: int) -> float:
        return _pass_hat_k(n, c, k)


@register_builtin
class GapK(_Sampled):
    """``pass@k - pass^k``: how much success depends on the sample (lower is more reliable)."""

    default_name = "gap_k"
    direction = "down"

    def estimate(self, n: int, c: int, k: int) -> float:
        return _pass_at_k(n, c, k) - _pass_hat_k(n, c, k)
