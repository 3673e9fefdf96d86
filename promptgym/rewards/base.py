"""``Reward``: scores one prediction against its ground truth, with optional feedback.

A reward returns a float (usually in [0, 1]). ``score()`` also returns a
textual feedback that reflective optimizers (GEPA) read; rewards without
feedback still work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from promptgym.core.schema import apply_mask, check_mask


@dataclass
class RewardResult:
    score: float
    feedback: str = ""


class JsonView(dict):
    """A masked DataModel as a dict that also answers ``get_json()``."""

    def get_json(self) -> dict[str, Any]:
        return dict(self)


def to_json(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return dict(value)
    if callable(getattr(value, "get_json", None)):  # a JsonDataModel (a joined branch's output)
        return value.get_json()
    raise TypeError(f"expected a DataModel, a dict or None, got {type(value).__name__}")


def coerce_result(value: Any, where: str) -> RewardResult:
    """A reward function may return a float, (float, feedback) or {"score"/"reward", "feedback"}."""
    if isinstance(value, RewardResult):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return RewardResult(float(value[0]), str(value[1]))
    if isinstance(value, dict):
        score = value.get("score", value.get("reward"))
        if score is None:
            raise ValueError(f"{where}: a dict result needs a 'score' key, got {sorted(value)}")
        return RewardResult(float(score), str(value.get("feedback", "")))
    try:
        return RewardResult(float(value))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {value!r}") from None


class Reward:
    """Base class. Subclasses implement ``compute(y_true, y_pred) -> RewardResult | float``.

    ``in_mask`` keeps only the named fields, ``out_mask`` drops fields;
    ``y_pred`` is None when the prediction failed, which scores 0.
    """

    default_name = "reward"

    def __init__(self, in_mask: list[str] | None = None, out_mask: list[str] | None = None, name: str | None = None) -> None:
        self.in_mask = list(in_mask) if in_mask is not None else None
        self.out_mask = list(out_mask) if out_mask is not None else None
        self.name = name or self.default_name

    def check_fields(self, fields: list[str]) -> None:
        """Raise if a mask names a field that the program's output doesn't have."""
        check_mask(fields, self.in_mask, self.out_mask, type(self).__name__)

    def mask(self, value: Any) -> JsonView | None:
        data = to_json(value)
        return None if data is None else JsonView(apply_mask(data, self.in_mask, self.out_mask))

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        true, pred = self.mask(y_true), self.mask(y_pred)
        if pred is None:
            return RewardResult(0.0, "the program failed to produce a prediction")
        return coerce_result(await self.compute(true, pred), type(self).__name__)

    async def __call__(self, y_true: Any, y_pred: Any) -> float:
        return (await self.score(y_true, y_pred)).score

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> Any:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {"in_mask": self.in_mask, "out_mask": self.out_mask, "name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Reward":
        return cls(**config)
