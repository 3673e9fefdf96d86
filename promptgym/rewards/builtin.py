"""The built-in rewards: ExactMatch, CosineSimilarity, LMAsJudge, MeanRewardWrapper (ProgramAsJudge is in programs)."""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable

import numpy as np

from promptgym.core.data_model import DataModel, Field
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.defaults import get_default_embedding_model, get_default_language_model
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.language_model import LanguageModel
from promptgym.rewards.base import JsonView, Reward, RewardResult, coerce_result


def _normalize(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _as_text(value: JsonView | None) -> str:
    if value is None:
        return ""
    if len(value) == 1:
        only = next(iter(value.values()))
        return only if isinstance(only, str) else json.dumps(only, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@register_builtin
class ExactMatch(Reward):
    """1.0 when every (masked) field equals the ground truth, else 0.0.

    Strings are compared after stripping surrounding whitespace. The feedback
    names each field that differs, with what was expected.
    """

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        true = y_true or {}
        wrong = [key for key in true if _normalize(true.get(key)) != _normalize(y_pred.get(key))]
        if not wrong:
            return RewardResult(1.0, "correct")
        details = "; ".join(f"{key}: expected {true.get(key)!r}, got {y_pred.get(key)!r}" for key in wrong)
        return RewardResult(0.0, f"wrong {details}")


@register_builtin
class CosineSimilarity(Reward):
    """Cosine similarity (clipped to [0, 1]) of the embeddings of the masked fields."""

    def __init__(self, embedding_model: EmbeddingModel | None = None, in_mask: list[str] | None = None,
                 out_mask: list[str] | None = None, name: str | None = None) -> None:
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name)
        self.embedding_model = embedding_model or get_default_embedding_model("CosineSimilarity")

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        vectors = await self.embedding_model([_as_text(y_true), _as_text(y_pred)])
        similarity = float(np.clip(np.dot(vectors[0], vectors[1]), 0.0, 1.0))
        return RewardResult(similarity, f"similarity to the expected answer: {similarity:.2f}")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "embedding_model": serialize_object(self.embedding_model)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "CosineSimilarity":
        return cls(**{**config, "embedding_model": deserialize_object(config["embedding_model"], expected="embedding model")})


class JudgeVerdict(DataModel):
    critique: str = Field(description="What is right or wrong in the prediction, in one or two sentences")
    reward: float = Field(ge=0.0, le=1.0, description="Score from 0.0 (wrong) to 1.0 (fully correct)")


@register_builtin
class LMAsJudge(Reward):
    """A language model grades the prediction against the ground truth and the criteria."""

    def __init__(self, language_model: LanguageModel | None = None, criteria: str = "accuracy and completeness",
                 in_mask: list[str] | None = None, out_mask: list[str] | None = None, name: str | None = None) -> None:
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name)
        self.language_model = language_model or get_default_language_model("LMAsJudge")
        self.criteria = criteria

    def messages(self, y_true: JsonView | None, y_pred: JsonView) -> list[dict[str, str]]:
        system = (
            f"You grade predictions. Criteria: {self.criteria}. Compare the prediction with the ground truth "
            "(when given) and answer with JSON: critique (short), reward (0.0 to 1.0)."
        )
        user = json.dumps({"ground_truth": y_true, "prediction": y_pred}, ensure_ascii=False)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        from promptgym.core.schema import bounded_schema

        verdict = await self.language_model(
            self.messages(y_true, y_pred), schema=bounded_schema(JudgeVerdict.get_schema(), 300),
            validation_schema=JudgeVerdict.get_schema(),
        )
        return RewardResult(float(verdict["reward"]), verdict["critique"])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "criteria": self.criteria, "language_model": serialize_object(self.language_model)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "LMAsJudge":
        return cls(**{**config, "language_model": deserialize_object(config["language_model"], expected="language model")})


@register_builtin
class MeanRewardWrapper(Reward):
    """Wraps an async (or plain) ``fn(y_true, y_pred)``; register ``fn`` to save the program.

    ``fn`` may return a float, ``(score, feedback)`` or ``{"score": ..., "feedback": ...}``.
    ``MeanMetricWrapper`` is the same wrapper as a metric.
    """

    function_kind = "reward function"

    def __init__(self, fn: Callable[..., Any] | None = None, in_mask: list[str] | None = None,
                 out_mask: list[str] | None = None, name: str | None = None) -> None:
        if fn is None or not callable(fn):
            raise ValueError(f"{type(self).__name__} needs fn=, an async function (y_true, y_pred) -> float")
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name or self.default_name_for(fn))
        self.fn = fn

    def default_name_for(self, fn: Callable[..., Any]) -> str:
        return "reward"

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        value = self.fn(self.mask(y_true), self.mask(y_pred))
        if inspect.isawaitable(value):
            value = await value
        return coerce_result(value, getattr(self.fn, "__name__", self.function_kind))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "fn": serialize_object(self.fn)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "MeanRewardWrapper":
        return cls(**{**config, "fn": deserialize_object(config["fn"], expected=cls.function_kind)})
