"""Word-level metrics for QA answers: ``Accuracy`` (Jaccard), ``FBetaScore``/``F1Score``, ``Precision``, ``Recall``.

Each field (leaf) of the masked prediction is compared with the same field
of the label; ``average`` combines the fields (and, over several examples,
pools their counts): ``"micro"`` pools the token counts, ``"macro"`` averages
the fields, ``"weighted"`` weighs them by the label's tokens, ``None`` gives
one score per field.
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.metrics.base import Metric
from promptgym.metrics.fields import averaged, check_average, f_beta, overlap, paired_leaves, precision, recall, words
from promptgym.rewards.base import JsonView


@register_builtin
class FBetaScore(Metric):
    """Word-level F-beta (SQuAD multiset overlap) per field; see the module docstring."""

    default_name = "fbeta_score"
    formula = staticmethod(f_beta)

    def __init__(self, average: Any = None, beta: float = 1.0, name: str | None = None, **masks: Any) -> None:
        self.average = check_average(average)
        self.beta = beta
        super().__init__(name=name, **masks)

    def initial_state(self) -> dict[str, Any]:
        return {"fields": {}}

    async def example_state(self, y_true: JsonView | None, y_pred: JsonView | None) -> dict[str, Any]:
        return {"fields": {path: list(overlap(words(true), words(pred))) for path, true, pred in paired_leaves(y_true, y_pred)}}

    def result_of(self, state: dict[str, Any]) -> Any:
        return averaged(state["fields"], lambda c: self.formula(c[0], c[1], c[2], self.beta), lambda c: c[0] + c[2],
                        self.average)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "average": self.average, "beta": self.beta}


@register_builtin
class F1Score(FBetaScore):
    default_name = "f1_score"

    def __init__(self, average: Any = None, name: str | None = None, **masks: Any) -> None:
        super().__init__(average=average, beta=1.0, name=name, **masks)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.pop("beta")
        return config


@register_builtin
class Precision(F1Score):
    """Share of predicted words found in the label, per field."""

    default_name = "precision"
    formula = staticmethod(precision)


@register_builtin
class Recall(F1Score):
    """Share of the label's words found in the prediction, per field."""

    default_name = "recall"
    formula = staticmethod(recall)


@register_builtin
class Accuracy(Metric):
    """Word-set Jaccard index |true ∩ pred| / |true ∪ pred| per field; see the module docstring."""

    default_name = "accuracy"

    def __init__(self, average: Any = None, name: str | None = None, **masks: Any) -> None:
        self.average = check_average(average)
        super().__init__(name=name, **masks)

    def initial_state(self) -> dict[str, Any]:
        return {"fields": {}}

    async def example_state(self, y_true: JsonView | None, y_pred: JsonView | None) -> dict[str, Any]:
        fields = {}
        for path, true, pred in paired_leaves(y_true, y_pred):
            true_set, pred_set = set(words(true)), set(words(pred))
            if true_set or pred_set:
                fields[path] = [len(true_set & pred_set), len(true_set | pred_set), len(true_set)]
        return {"fields": fields}

    def result_of(self, state: dict[str, Any]) -> Any:
        return averaged(state["fields"], lambda c: c[0] / c[1] if c[1] else 0.0, lambda c: c[2], self.average)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "average": self.average}
