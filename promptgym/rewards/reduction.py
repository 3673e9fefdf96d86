"""Reducing per-sample rewards to one number, and masking a batch of samples (synalinks' reward helpers).

>>> reduce_values([0.2, 0.9, 0.5], "max")
0.9
>>> reduce_rewards([0.0, 1.0], None)
0.5
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.core.json_ops import in_mask_json, out_mask_json
from promptgym.rewards.base import JsonView, to_json

REDUCTIONS = ("mean", "sum", "min", "max", "none")


def _check(reduction: str | None) -> None:
    if reduction is not None and reduction not in REDUCTIONS:
        raise ValueError(f"reduction {reduction!r}: expected one of {', '.join(REDUCTIONS)} (or None)")


def reduce_values(values: Any, reduction: str | None = "mean") -> Any:
    """One number from per-sample ``values``; ``"none"``/None keeps a list as it is. An empty batch is 0.0."""
    _check(reduction)
    if hasattr(values, "__len__") and len(values) == 0:
        return 0.0  # no signal: every reduction is 0, never an empty list or numpy's zero-size error
    if reduction is None or reduction == "none":
        return values if hasattr(values, "__len__") else float(values)
    if not hasattr(values, "__len__"):
        return float(values)
    array = np.asarray(values, dtype=float)
    return float({"min": np.min, "max": np.max, "sum": np.sum, "mean": np.mean}[reduction](array))


def reduce_rewards(rewards: Any, reduction: str | None = "mean") -> float:
    """A scalar from a per-sample reward list (``"none"``/None mean, since a score is always one number)."""
    _check(reduction)
    if rewards is None or len(rewards) == 0:
        return 0.0
    return reduce_values(rewards, "mean" if reduction in (None, "none") else reduction)


def _mask_one(value: Any, in_mask: list[str] | None, in_mask_pattern: str | None, out_mask: list[str] | None,
              out_mask_pattern: str | None) -> JsonView | None:
    data = to_json(value)
    if data is None:
        return None
    if in_mask or in_mask_pattern:
        data = in_mask_json(data, mask=in_mask or [], pattern=in_mask_pattern)
    if out_mask or out_mask_pattern:
        data = out_mask_json(data, mask=out_mask or [], pattern=out_mask_pattern, recursive=False)
    return JsonView(data)


def apply_masks(y_true: Any, y_pred: Any, in_mask: list[str] | None = None, in_mask_pattern: str | None = None,
                out_mask: list[str] | None = None, out_mask_pattern: str | None = None) -> tuple[Any, Any]:
    """``(y_true, y_pred)`` as JSON views with the fields masks applied; a sample or a list of them, Nones kept."""
    def mask(value: Any) -> Any:
        return _mask_one(value, in_mask, in_mask_pattern, out_mask, out_mask_pattern)

    def over(values: Any) -> Any:
        if values is None:
            return None
        if isinstance(values, (list, tuple)):
            return type(values)(mask(value) for value in values)
        return mask(values)

    return over(y_true), over(y_pred)


__all__ = ["REDUCTIONS", "apply_masks", "reduce_rewards", "reduce_values"]
