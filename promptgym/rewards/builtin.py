"""The built-in rewards: ExactMatch, CosineSimilarity, LMAsJudge, MeanRewardWrapper (ProgramAsJudge is in programs)."""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any, Callable

import numpy as np

from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.lm.defaults import get_default_embedding_model, get_default_language_model
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.usage import lm_phase
from promptgym.lm.language_model import LanguageModel
from promptgym.rewards.base import JsonView, Reward, RewardResult, coerce_result
from promptgym.rewards.judge_program import LMAsJudgeProgram
from promptgym.rewards.reduction import REDUCTIONS, reduce_values

logger = logging.getLogger("promptgym")


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
                 out_mask: list[str] | None = None, name: str | None = None, **mask_patterns: Any) -> None:
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name, **mask_patterns)
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


@register_builtin
class LMAsJudge(Reward):
    """A language model grades the prediction against the ground truth.

    Args:
        language_model: the judge (default: ``set_default_language_model``'s).
        criteria: what to grade on (promptgym), or
        instructions: the judge's whole instructions (synalinks); default: grade on accuracy and
            completeness, with the scale spelled out.
        score_type: the scale the judge picks from (``Score`` by default, ``Rating``...,
            see :mod:`promptgym.core.scores`); the reward is that grade mapped to 0..1.

    The judge is a program (``judge.program``, whose ``critique`` is a
    :class:`SelfCritique`) trained like any other. A prediction that is
    missing scores 0 without a call; a judge answer without a grade scores 0,
    with the reason logged.
    """

    def __init__(self, language_model: LanguageModel | None = None, criteria: str = "accuracy and completeness",
                 instructions: str | None = None, score_type: Any = None, in_mask: list[str] | None = None,
                 out_mask: list[str] | None = None, name: str | None = None, **options: Any) -> None:
        mask_patterns = {key: options.pop(key) for key in ("in_mask_pattern", "out_mask_pattern") if key in options}
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name, **mask_patterns)
        self.language_model = language_model or get_default_language_model("LMAsJudge")
        self.criteria = criteria
        self.instructions = instructions
        self.program = LMAsJudgeProgram(language_model=self.language_model, criteria=criteria,
                                        instructions=instructions, score_type=score_type, **options)
        self.score_type = self.program.score_type

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        with lm_phase("judge"):  # a judge's calls are spend of their own, apart from other rewards'
            verdict = await self.program.judge(y_true, y_pred)
        reward = verdict.get("reward") if verdict is not None else None
        if reward is None:
            logger.warning("LMAsJudge %s: the judge gave no grade (%s); scoring 0", self.name,
                           "no answer" if verdict is None else f"answer fields {sorted(verdict.keys())}")
            return RewardResult(0.0, "the judge gave no grade")
        return RewardResult(float(reward), str(verdict.get("critique") or ""))

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "criteria": self.criteria, "language_model": serialize_object(self.language_model),
                  "score_type": self.score_type.__name__}
        if self.instructions is not None:
            config["instructions"] = self.instructions
        return config

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
                 out_mask: list[str] | None = None, name: str | None = None, in_mask_pattern: str | None = None,
                 out_mask_pattern: str | None = None, reduction: str = "mean", **fn_kwargs: Any) -> None:
        if fn is None or not callable(fn):
            raise ValueError(f"{type(self).__name__} needs fn=, an async function (y_true, y_pred) -> float")
        if reduction not in REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {', '.join(REDUCTIONS)}, "
                             f"got {reduction!r}")
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name or self.default_name_for(fn),
                         in_mask_pattern=in_mask_pattern, out_mask_pattern=out_mask_pattern)
        self.fn = fn
        self.reduction = reduction
        """How a batch's scores become one (synalinks' argument; a single sample's score is itself)."""
        self.fn_kwargs = fn_kwargs

    @property
    def _fn_kwargs(self) -> dict[str, Any]:
        """synalinks' attribute name for :attr:`fn_kwargs`."""
        return self.fn_kwargs

    @property
    def _fn(self) -> Callable[..., Any]:
        """synalinks' attribute name for :attr:`fn`."""
        return self.fn

    def default_name_for(self, fn: Callable[..., Any]) -> str:
        return "reward"

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        value = self.fn(self.mask(y_true), self.mask(y_pred), **self.fn_kwargs)
        if inspect.isawaitable(value):
            value = await value
        return coerce_result(value, getattr(self.fn, "__name__", self.function_kind))

    def get_config(self) -> dict[str, Any]:
        # fn's own arguments under their own key, so one named `name` or `reduction` can't shadow ours
        return {**super().get_config(), "reduction": self.reduction, "fn": serialize_object(self.fn),
                "fn_kwargs": dict(self.fn_kwargs)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "MeanRewardWrapper":
        config = dict(config)
        fn_kwargs = config.pop("fn_kwargs", None) or {}  # files saved before kept them at the top level
        return cls(**{**config, **fn_kwargs, "fn": deserialize_object(config["fn"], expected=cls.function_kind)})


@register_builtin
class RewardFunctionWrapper(MeanRewardWrapper):
    """synalinks' name for :class:`MeanRewardWrapper` (the same wrapper, saved under this name).

    >>> async def same(y_true, y_pred):
    ...     return float(y_true == y_pred)
    >>> RewardFunctionWrapper(fn=same, reduction="sum").get_config()["reduction"]
    'sum'
    """


@register_builtin
class BatchReward(Reward):
    """A reward over a whole batch at once (group-relative rewards): ``call(y_true_list, y_pred_list) -> list``.

    ``await reward(y_trues, y_preds)`` reduces the per-example rewards
    (``reduction``: ``"mean"``, ``"sum"``, ``"min"``, ``"max"`` or ``"none"``).
    Training scores examples one at a time (each is memoised and may run on
    another worker), so there a batch reward sees batches of one.
    """

    def __init__(self, reduction: str = "mean", in_mask: list[str] | None = None, out_mask: list[str] | None = None,
                 name: str | None = None, **mask_patterns: Any) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name, **mask_patterns)
        self.reduction = reduction

    async def call(self, y_true: list[Any], y_pred: list[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define `async def call(self, y_true, y_pred)`")

    async def compute_batch(self, y_true: Any, y_pred: Any) -> list[float]:
        """One reward per example (masks applied first)."""
        trues, preds = list(y_true), list(y_pred)
        values = self.call([self.mask(value) for value in trues], [self.mask(value) for value in preds])
        if inspect.isawaitable(values):
            values = await values
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"{self.name}: a batch reward must return a list with one reward per example, "
                            f"got {type(values).__name__}")
        rewards = [float(value) for value in values]
        if len(rewards) != len(trues):
            raise ValueError(f"{self.name}: the batch has {len(trues)} samples but {len(rewards)} rewards came back")
        return rewards

    async def __call__(self, y_true: Any, y_pred: Any) -> Any:
        single = not isinstance(y_true, (list, tuple, np.ndarray))
        rewards = await self.compute_batch([y_true] if single else y_true, [y_pred] if single else y_pred)
        return rewards[0] if single else reduce_values(rewards, self.reduction)

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        if y_pred is None:
            return RewardResult(0.0, "the program failed to produce a prediction")
        return RewardResult((await self.compute_batch([y_true], [y_pred]))[0])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "reduction": self.reduction}


@register_builtin
class BatchRewardFunctionWrapper(BatchReward):
    """A batch reward from ``fn(y_trues, y_preds, **kwargs) -> list`` (register ``fn`` to save)."""

    def __init__(self, fn: Callable[..., Any] | None = None, reduction: str = "mean", in_mask: list[str] | None = None,
                 out_mask: list[str] | None = None, name: str | None = None, in_mask_pattern: str | None = None,
                 out_mask_pattern: str | None = None, **fn_kwargs: Any) -> None:
        if fn is None or not callable(fn):
            raise ValueError("BatchRewardFunctionWrapper needs fn=, a function (y_trues, y_preds) -> list of floats")
        super().__init__(reduction=reduction, in_mask=in_mask, out_mask=out_mask,
                         name=name or getattr(fn, "__name__", "reward"), in_mask_pattern=in_mask_pattern,
                         out_mask_pattern=out_mask_pattern)
        self.fn = fn
        self.fn_kwargs = fn_kwargs

    async def call(self, y_true: list[Any], y_pred: list[Any]) -> Any:
        value = self.fn(y_true, y_pred, **self.fn_kwargs)
        return await value if inspect.isawaitable(value) else value

    @property
    def _fn_kwargs(self) -> dict[str, Any]:
        """synalinks' attribute name for :attr:`fn_kwargs`."""
        return self.fn_kwargs

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "fn": serialize_object(self.fn), "fn_kwargs": dict(self.fn_kwargs)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "BatchRewardFunctionWrapper":
        config = dict(config)
        fn_kwargs = config.pop("fn_kwargs", None) or {}
        return cls(**{**config, **fn_kwargs, "fn": deserialize_object(config["fn"], expected="batch reward function")})




async def exact_match(y_true: Any, y_pred: Any, **options: Any) -> float:
    """1.0 if the (masked) fields are equal, else 0.0 (``ExactMatch`` as a function)."""
    return await ExactMatch(**options)(y_true, y_pred)


async def cosine_similarity(y_true: Any, y_pred: Any, embedding_model: EmbeddingModel | None = None,
                            **options: Any) -> float:
    """Cosine similarity of the embeddings of the (masked) fields (``CosineSimilarity`` as a function)."""
    return await CosineSimilarity(embedding_model=embedding_model, **options)(y_true, y_pred)
