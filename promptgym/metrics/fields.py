"""Reading a (masked) prediction as scorable pieces: field leaves, word tokens, binary values, labels.

Nested objects and lists are flattened into leaves named by their path
(``relations[1]``, ``step.answer``), so a list the model answered shorter than
the label still counts its missing items.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Callable

import numpy as np

_IGNORED_WORDS = re.compile(r"\b(a|an|the|of|is)\b", re.UNICODE)
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """``{path: scalar}`` of a JSON value (``{"a": [1, {"b": 2}]}`` -> ``{"a[0]": 1, "a[1].b": 2}``)."""
    if isinstance(value, dict):
        found: dict[str, Any] = {}
        for key, item in value.items():
            found.update(leaves(item, f"{path}.{key}" if path else str(key)))
        return found
    if isinstance(value, (list, tuple)):
        found = {}
        for index, item in enumerate(value):
            found.update(leaves(item, f"{path}[{index}]"))
        return found
    return {path: value}


def paired_leaves(y_true: Any, y_pred: Any) -> list[tuple[str, Any, Any]]:
    """Every leaf of either side, with the other side's value (None where it has none)."""
    true, pred = leaves(y_true or {}), leaves(y_pred or {})
    return [(path, true.get(path), pred.get(path)) for path in dict.fromkeys([*true, *pred])]


def words(value: Any) -> list[str]:
    """Word tokens for QA metrics: lower case, punctuation and a few filler words (a, an, the, of, is) removed."""
    if value is None:
        return []
    text = value if isinstance(value, str) else str(value)
    return _IGNORED_WORDS.sub(" ", text.lower()).translate(_PUNCTUATION).split()


def overlap(true: list[str], pred: list[str]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) of two token multisets."""
    common = sum((Counter(true) & Counter(pred)).values())
    return common, len(pred) - common, len(true) - common


def binary(value: Any, threshold: float) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    try:
        return float(value) > threshold
    except (TypeError, ValueError):
        return bool(value)


def label_set(value: Any) -> set[str]:
    """Every leaf value of a (masked) value as a label."""
    return {str(item) for item in leaves(value or {}).values() if item is not None}


def f_beta(tp: float, fp: float, fn: float, beta: float = 1.0) -> float:
    b2 = beta * beta
    denominator = (1 + b2) * tp + b2 * fn + fp
    return (1 + b2) * tp / denominator if denominator else 0.0


def precision(tp: float, fp: float, fn: float, beta: float = 1.0) -> float:
    return tp / (tp + fp) if tp + fp else 0.0


def recall(tp: float, fp: float, fn: float, beta: float = 1.0) -> float:
    return tp / (tp + fn) if tp + fn else 0.0


AVERAGES = (None, "micro", "macro", "weighted")


def check_average(average: Any) -> Any:
    if average not in AVERAGES:
        raise ValueError(f"average must be one of None, 'micro', 'macro', 'weighted'; got {average!r}")
    return average


def averaged(per_key: dict[str, list[float]], score: Callable[[list[float]], float], support: Callable[[list[float]], float],
             average: Any) -> Any:
    """Per-key scores combined: None (each), micro (pooled counts), macro (mean), weighted (by support)."""
    if not per_key:
        return 0.0
    if average == "micro":
        pooled = [float(sum(values)) for values in zip(*per_key.values())]
        return score(pooled)
    scores = {key: score(counts) for key, counts in per_key.items()}
    if average is None:
        return scores if len(scores) > 1 else next(iter(scores.values()))
    if average == "weighted":
        weights = {key: support(counts) for key, counts in per_key.items()}
        total = sum(weights.values())
        if total:
            return float(sum(scores[key] * weights[key] for key in scores) / total)
    return float(np.mean(list(scores.values())))
