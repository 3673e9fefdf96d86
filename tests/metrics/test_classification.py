"""Binary* and Categorical* metrics: each score on counts worked out by hand, averages, configs."""

from __future__ import annotations

import pytest

from promptgym import metrics
from promptgym.metrics import classification as c

# Per field: a = [tp 1, fp 1, fn 1, tn 0], b = [tp 2, fp 1, fn 0, tn 0]; pooled: tp 3, fp 2, fn 1.
BINARY = [({"a": True, "b": False}, {"a": True, "b": True}), ({"a": False, "b": True}, {"a": True, "b": True}),
          ({"a": True, "b": True}, {"a": False, "b": True})]
# Pooled label sets: tp 2 (x, y), fp 0, fn 1 (y); per label: x = [1, 0, 0, 1], y = [1, 0, 1, 0].
CATEGORICAL = [({"l": ["x", "y"]}, {"l": ["x"]}), ({"l": ["y"]}, {"l": ["y"]})]


async def result(metric, pairs):
    for y_true, y_pred in pairs:
        await metric.update_state(y_true, y_pred)
    return metric.result()


@pytest.mark.parametrize("metric,per_field,micro", [
    (c.BinaryAccuracy(), {"a": 1 / 3, "b": 2 / 3}, 0.5),
    (c.BinaryPrecision(), {"a": 0.5, "b": 2 / 3}, 3 / 5),
    (c.BinaryRecall(), {"a": 0.5, "b": 1.0}, 3 / 4),
    (c.BinaryF1Score(), {"a": 0.5, "b": 0.8}, 6 / 9),
    (c.BinaryFBetaScore(beta=2.0), {"a": 0.5, "b": 10 / 11}, 15 / 21),
], ids=lambda value: type(value).__name__ if isinstance(value, c._Counted) else "")
async def test_binary_scores(metric, per_field, micro):
    assert await result(metric, BINARY) == pytest.approx(per_field)
    pooled = type(metric).from_config({**metric.get_config(), "average": "micro"})
    assert await result(pooled, BINARY) == pytest.approx(micro)
    macro = type(metric).from_config({**metric.get_config(), "average": "macro"})
    assert await result(macro, BINARY) == pytest.approx(sum(per_field.values()) / 2)


@pytest.mark.parametrize("cls,pooled,per_label", [
    (c.CategoricalAccuracy, 2 / 3, {"x": 1.0, "y": 0.5}),
    (c.CategoricalPrecision, 1.0, {"x": 1.0, "y": 1.0}),
    (c.CategoricalRecall, 2 / 3, {"x": 1.0, "y": 0.5}),
    (c.CategoricalF1Score, 0.8, {"x": 1.0, "y": 2 / 3}),
], ids=lambda value: value.__name__ if isinstance(value, type) else "")
async def test_categorical_scores(cls, pooled, per_label):
    assert await result(cls(), CATEGORICAL) == pytest.approx(pooled)
    assert await result(cls(labels=["x", "y"]), CATEGORICAL) == pytest.approx(per_label)


async def test_fbeta_weighs_recall_by_beta_and_keeps_beta_in_its_config():
    # beta 0.5 on tp 2, fp 0, fn 1: 1.25 * 2 / (1.25 * 2 + 0.25 * 1)
    metric = c.CategoricalFBetaScore(beta=0.5)
    assert await result(metric, CATEGORICAL) == pytest.approx(2.5 / 2.75)
    again = metrics.deserialize(metrics.serialize(metric))
    assert type(again) is c.CategoricalFBetaScore and again.beta == 0.5 and again.get_config() == metric.get_config()
    assert "beta" not in c.CategoricalF1Score().get_config() and "beta" not in c.BinaryPrecision().get_config()
    assert c.BinaryFBetaScore(beta=3.0, threshold=0.2).get_config()["threshold"] == 0.2
