"""``promptgym.metrics``: monitored during training, never optimised.

Metrics follow Keras' stateful protocol (``update_state``, ``result``,
``reset_state``, ``variables``; ``await metric(y_true, y_pred)`` updates and
returns the running result). Training records each example's value; History
reports their mean per epoch (operational metrics: their value at the end).
"""

from __future__ import annotations

from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.core.serialization import deserialize_in_scope, register_builtin, serialize_object
from promptgym.metrics.base import Mean, MeanMetricWrapper, Metric, Sum
from promptgym.metrics.classification import (
    BinaryAccuracy,
    BinaryF1Score,
    BinaryFBetaScore,
    BinaryPrecision,
    BinaryRecall,
    CategoricalAccuracy,
    CategoricalF1Score,
    CategoricalFBetaScore,
    CategoricalPrecision,
    CategoricalRecall,
    ListF1Score,
    ListFBetaScore,
)
from promptgym.metrics.fields import words as tokens
from promptgym.metrics.operational import *  # noqa: F403 - TotalTokens, ProgramCalls, ... (listed below)
from promptgym.metrics.operational import (
    OPERATIONAL_METRICS,
    EmbeddingModelOperationalMetric,
    EmbeddingModelOptimizersOperationalMetric,
    EmbeddingModelRewardsOperationalMetric,
    LMOperationalMetric,
    LMOptimizersOperationalMetric,
    LMRewardsOperationalMetric,
    OperationalMetric,
    ProgramOperationalMetric,
)
from promptgym.metrics.sampled import BatchMetric, GapK, PassAtK, PassHatK
from promptgym.metrics.similarity import CosineSimilarity
from promptgym.metrics.token import Accuracy, F1Score, FBetaScore, Precision, Recall
from promptgym.rewards.base import Reward

for _cls in (Mean, Sum, MeanMetricWrapper):
    register_builtin(_cls)

_ALL = [Accuracy, BinaryAccuracy, BinaryF1Score, BinaryFBetaScore, BinaryPrecision, BinaryRecall, CategoricalAccuracy,
        CategoricalF1Score, CategoricalFBetaScore, CategoricalPrecision, CategoricalRecall, CosineSimilarity, F1Score,
        FBetaScore, GapK, Mean, PassAtK, PassHatK, Precision, Recall, Sum, *OPERATIONAL_METRICS]
METRICS: dict[str, Any] = {"f1": F1Score, "f1score": F1Score, "listf1score": ListF1Score,
                           "listfbetascore": ListFBetaScore}
for _cls in _ALL:
    METRICS[_cls.__name__.lower()] = _cls


def get(identifier: Any) -> Metric:
    """A metric from an instance, a name (``"f1_score"``, ``"F1Score"``) or a config dict."""
    return get_by_identifier(identifier, METRICS, "metric", base=Reward)


__all__ = ["METRICS", "BatchMetric", "ListF1Score", "ListFBetaScore", "MeanMetricWrapper", "Metric",
           "OperationalMetric", "LMOperationalMetric", "LMRewardsOperationalMetric", "LMOptimizersOperationalMetric",
           "EmbeddingModelOperationalMetric", "EmbeddingModelRewardsOperationalMetric",
           "EmbeddingModelOptimizersOperationalMetric", "ProgramOperationalMetric", "get", "tokens", *(cls.__name__ for cls in _ALL), "deserialize", "serialize"]


def serialize(metric: Any) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` of a metric."""
    return serialize_object(metric)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Any:
    """Rebuild a metric from :func:`serialize`'s dict (registered classes, or ``custom_objects``)."""
    return deserialize_in_scope(config, custom_objects, expected="metric")
