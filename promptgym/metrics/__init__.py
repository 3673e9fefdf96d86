"""``promptgym.metrics``: monitored during training, never optimised.

Each metric scores one (y_true, y_pred) pair; the trainer reports the mean
over the examples of an epoch or an evaluation.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from typing import Any, Callable

from promptgym.core.identifiers import get_by_identifier
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.rewards.base import Reward, RewardResult

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(value: Any) -> list[str]:
    """Lower-cased word tokens of every (masked) field value."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [token for item in value.values() for token in tokens(item)]
    if isinstance(value, (list, tuple)):
        return [token for item in value for token in tokens(item)]
    return _TOKEN.findall(str(value).lower())


def overlap(y_true: Any, y_pred: Any) -> tuple[int, int, int]:
    """(common, predicted, expected) token counts."""
    true, pred = Counter(tokens(y_true)), Counter(tokens(y_pred))
    return sum((true & pred).values()), sum(pred.values()), sum(true.values())


class Metric(Reward):
    """A metric is scored like a reward but only reported."""

    default_name = "metric"


@register_builtin
class F1Score(Metric):
    """Token-level F1 between the masked fields of prediction and ground truth."""

    default_name = "f1_score"

    async def compute(self, y_true: Any, y_pred: Any) -> RewardResult:
        common, predicted, expected = overlap(y_true, y_pred)
        if common == 0:
            return RewardResult(float(predicted == expected == 0))
        precision, recall = common / predicted, common / expected
        return RewardResult(2 * precision * recall / (precision + recall))


@register_builtin
class Precision(Metric):
    """Share of predicted tokens that appear in the ground truth."""

    default_name = "precision"

    async def compute(self, y_true: Any, y_pred: Any) -> RewardResult:
        common, predicted, expected = overlap(y_true, y_pred)
        return RewardResult(common / predicted if predicted else float(expected == 0))


@register_builtin
class Recall(Metric):
    """Share of ground-truth tokens that appear in the prediction."""

    default_name = "recall"

    async def compute(self, y_true: Any, y_pred: Any) -> RewardResult:
        common, predicted, expected = overlap(y_true, y_pred)
        return RewardResult(common / expected if expected else 1.0)


@register_builtin
class MeanMetricWrapper(Metric):
    """Mean of an async (or plain) ``fn(y_true, y_pred) -> float``; register ``fn`` to save."""

    def __init__(self, fn: Callable[..., Any] | None = None, in_mask: list[str] | None = None,
                 out_mask: list[str] | None = None, name: str | None = None) -> None:
        if fn is None or not callable(fn):
            raise ValueError("MeanMetricWrapper needs fn=, an async function (y_true, y_pred) -> float")
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name or getattr(fn, "__name__", "metric"))
        self.fn = fn

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        value = self.fn(self.mask(y_true), self.mask(y_pred))
        if inspect.isawaitable(value):
            value = await value
        return RewardResult(float(value))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "fn": serialize_object(self.fn)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "MeanMetricWrapper":
        return cls(**{**config, "fn": deserialize_object(config["fn"], expected="metric function")})


@register_builtin
class Mean(Metric):
    """Mean exact-match of the masked fields: the share of fully correct predictions."""

    default_name = "mean"

    async def compute(self, y_true: Any, y_pred: Any) -> RewardResult:
        from promptgym.rewards.builtin import ExactMatch

        return await ExactMatch().compute(y_true, y_pred)


METRICS = {"f1score": F1Score, "f1": F1Score, "precision": Precision, "recall": Recall, "mean": Mean}


def get(identifier: Any) -> Metric:
    """A metric from an instance, a name (``"f1_score"``) or a config dict."""
    return get_by_identifier(identifier, METRICS, "metric", base=Reward)


__all__ = ["F1Score", "METRICS", "Mean", "MeanMetricWrapper", "Metric", "Precision", "Recall", "get", "tokens"]
