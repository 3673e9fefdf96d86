"""``Reward``: scores one prediction against its ground truth, with optional feedback.

A reward returns a float (usually in [0, 1]). ``score()`` also returns a
textual feedback that reflective optimizers (GEPA) read; rewards without
feedback still work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from promptgym.core.json_ops import base_name, in_mask_json, out_mask_json
from promptgym.core.schema import check_mask


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
    ``in_mask_pattern`` / ``out_mask_pattern`` do the same for the fields whose
    names match a regular expression (a field is kept if named or matched).
    A name also covers the fields a concatenation suffixed (``answer_1``).
    ``y_pred`` is None when the prediction failed, which scores 0.
    """

    default_name = "reward"

    def __init__(self, in_mask: list[str] | None = None, out_mask: list[str] | None = None, name: str | None = None,
                 in_mask_pattern: str | None = None, out_mask_pattern: str | None = None) -> None:
        self.in_mask = list(in_mask) if in_mask is not None else None
        self.out_mask = list(out_mask) if out_mask is not None else None
        self.in_mask_pattern = in_mask_pattern
        self.out_mask_pattern = out_mask_pattern
        self.name = name or self.default_name

    def check_fields(self, fields: list[str]) -> None:
        """Raise if a mask names a field that the program's output doesn't have (base names count)."""
        known = [*fields, *{base_name(field) for field in fields}]
        check_mask(known, self.in_mask, self.out_mask, type(self).__name__)

    def mask(self, value: Any) -> JsonView | None:
        data = to_json(value)
        if data is None:
            return None
        if self.in_mask is not None or self.in_mask_pattern:
            data = in_mask_json(data, mask=self.in_mask or [], pattern=self.in_mask_pattern)
        if self.out_mask or self.out_mask_pattern:
            data = out_mask_json(data, mask=self.out_mask or [], pattern=self.out_mask_pattern, recursive=False)
        return JsonView(data)

    def mask_options(self) -> dict[str, Any]:
        """The mask arguments, to pass on to ``super().__init__`` or another scorer."""
        return {"in_mask": self.in_mask, "out_mask": self.out_mask, "in_mask_pattern": self.in_mask_pattern,
                "out_mask_pattern": self.out_mask_pattern}

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
        config = {"in_mask": self.in_mask, "out_mask": self.out_mask, "name": self.name}
        for key in ("in_mask_pattern", "out_mask_pattern"):
            if getattr(self, key):
                config[key] = getattr(self, key)
        return config

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Reward":
        return cls(**config)


class NoReward(Reward):
    """What ``compile()`` holds without a reward: the program can predict and evaluate metrics, not train."""

    placeholder = True

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        return RewardResult(0.0)
