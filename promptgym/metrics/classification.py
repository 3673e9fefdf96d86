"""Field- and label-level metrics for classification: ``Binary*`` (one boolean per field) and ``Categorical*``
(each value, or list item, is a label).

Binary: each field of the masked prediction is a bool (or a float compared
with ``threshold``); per field, true/false positives and negatives pile up.

Categorical: the values are labels. Without ``labels=``, one set comparison
over all the values pooled; with ``labels=[...]``, counts per label
(sklearn-style), and ``average=None`` gives ``{label: score}``.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from promptgym.core.serialization import register_builtin
from promptgym.metrics.base import Metric
from promptgym.metrics.fields import averaged, binary, check_average, f_beta, label_set, paired_leaves, precision, recall
from promptgym.rewards.base import JsonView

_GLOBAL = "all"


class _Counted(Metric):
    """A metric whose state is ``{"counts": {key: [tp, fp, fn, tn]}}``."""

    def __init__(self, average: Any = None, name: str | None = None, **masks: Any) -> None:
        self.average = check_average(average)
        super().__init__(name=name, **masks)

    formula: ClassVar[Callable[..., float]]
    """The score of ``(tp, fp, fn, beta)``: ``precision``, ``recall`` or ``f_beta`` (a class may override
    :meth:`score_of` instead)."""
    beta = 1.0  # the F-beta classes take it as an argument; for the others it is f_beta's default, unused

    def initial_state(self) -> dict[str, Any]:
        return {"counts": {}}

    def score_of(self, counts: list[float]) -> float:
        return self.formula(counts[0], counts[1], counts[2], self.beta)

    def result_of(self, state: dict[str, Any]) -> Any:
        return averaged(state["counts"], self.score_of, lambda c: c[0] + c[2], self.average)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "average": self.average}


class _Binary(_Counted):
    def __init__(self, average: Any = None, threshold: float = 0.5, name: str | None = None, **masks: Any) -> None:
        self.threshold = threshold
        super().__init__(average=average, name=name, **masks)

    async def example_state(self, y_true: JsonView | None, y_pred: JsonView | None) -> dict[str, Any]:
        counts = {}
        for path, true, pred in paired_leaves(y_true, y_pred):
            t, p = binary(true, self.threshold), binary(pred, self.threshold)
            counts[path] = [int(t and p), int(p and not t), int(t and not p), int(not t and not p)]
        return {"counts": counts}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "threshold": self.threshold}


@register_builtin
class BinaryAccuracy(_Binary):
    """Share of boolean fields that agree."""

    default_name = "binary_accuracy"

    def score_of(self, counts: list[float]) -> float:
        total = sum(counts)
        return (counts[0] + counts[3]) / total if total else 0.0


@register_builtin
class BinaryFBetaScore(_Binary):
    default_name = "binary_fbeta_score"
    formula = staticmethod(f_beta)

    def __init__(self, average: Any = None, beta: float = 1.0, threshold: float = 0.5, name: str | None = None,
                 **masks: Any) -> None:
        self.beta = beta
        super().__init__(average=average, threshold=threshold, name=name, **masks)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta": self.beta}


@register_builtin
class BinaryF1Score(_Binary):
    default_name = "binary_f1_score"
    formula = staticmethod(f_beta)


@register_builtin
class BinaryPrecision(_Binary):
    default_name = "binary_precision"
    formula = staticmethod(precision)


@register_builtin
class BinaryRecall(_Binary):
    default_name = "binary_recall"
    formula = staticmethod(recall)


class _Categorical(_Counted):
    def __init__(self, average: Any = None, labels: list[str] | None = None, name: str | None = None,
                 **masks: Any) -> None:
        self.labels = list(labels) if labels is not None else None
        super().__init__(average=average, name=name, **masks)

    async def example_state(self, y_true: JsonView | None, y_pred: JsonView | None) -> dict[str, Any]:
        true, pred = label_set(y_true), label_set(y_pred)
        if self.labels is None:
            return {"counts": {_GLOBAL: [len(true & pred), len(pred - true), len(true - pred), 0]}}
        return {"counts": {label: [int(label in true and label in pred), int(label in pred and label not in true),
                                   int(label in true and label not in pred),
                                   int(label not in true and label not in pred)] for label in self.labels}}

    def result_of(self, state: dict[str, Any]) -> Any:
        result = super().result_of(state)
        if self.labels is not None and isinstance(result, float) and self.average is None:
            return {self.labels[0]: result}  # one label: still a per-label result
        return result

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "labels": self.labels}


@register_builtin
class CategoricalAccuracy(_Categorical):
    """Label-set Jaccard (no ``labels``), or per label the share of examples where its presence agrees."""

    default_name = "categorical_accuracy"

    def score_of(self, counts: list[float]) -> float:
        if self.labels is None:
            union = counts[0] + counts[1] + counts[2]
            return counts[0] / union if union else 0.0
        total = sum(counts)
        return (counts[0] + counts[3]) / total if total else 0.0


@register_builtin
class CategoricalFBetaScore(_Categorical):
    default_name = "categorical_fbeta_score"
    formula = staticmethod(f_beta)

    def __init__(self, average: Any = None, beta: float = 1.0, labels: list[str] | None = None,
                 name: str | None = None, **masks: Any) -> None:
        self.beta = beta
        super().__init__(average=average, labels=labels, name=name, **masks)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "beta": self.beta}


@register_builtin
class CategoricalF1Score(_Categorical):
    default_name = "categorical_f1_score"
    formula = staticmethod(f_beta)


@register_builtin
class CategoricalPrecision(_Categorical):
    default_name = "categorical_precision"
    formula = staticmethod(precision)


@register_builtin
class CategoricalRecall(_Categorical):
    default_name = "categorical_recall"
    formula = staticmethod(recall)


ListFBetaScore = CategoricalFBetaScore
ListF1Score = CategoricalF1Score
