"""``promptgym.metrics``: monitored during training, never optimised.

Each metric scores one (y_true, y_pred) pair; the trainer reports the mean
over the examples of an epoch or an evaluation.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

from promptgym.core.identifiers import get_by_identifier
from promptgym.core.serialization import register_builtin
from promptgym.rewards.base import Reward, RewardResult
from promptgym.rewards.builtin import ExactMatch, MeanRewardWrapper

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
class MeanMetricWrapper(MeanRewardWrapper, Metric):
    """Mean of an async (or plain) ``fn(y_true, y_pred) -> float``; register ``fn`` to save.

    The same wrapper as :class:`~promptgym.rewards.MeanRewardWrapper`, reported as a metric (named after ``fn``).
    """

    function_kind = "metric function"

    def default_name_for(self, fn: Callable[..., Any]) -> str:
        return getattr(fn, "__name__", "metric")


@register_builtin
class Mean(Metric):
    """Mean exact-match of the masked fields: the share of fully correct predictions."""

    default_name = "mean"

    async def compute(self, y_true: Any, y_pred: Any) -> RewardResult:
        return await ExactMatch().compute(y_true, y_pred)


METRICS = {"f1score": F1Score, "f1": F1Score, "precision": Precision, "recall": Recall, "mean": Mean}


def get(identifier: Any) -> Metric:
    """A metric from an instance, a name (``"f1_score"``) or a config dict."""
    return get_by_identifier(identifier, METRICS, "metric", base=Reward)


__all__ = ["F1Score", "METRICS", "Mean", "MeanMetricWrapper", "Metric", "Precision", "Recall", "get", "tokens"]
