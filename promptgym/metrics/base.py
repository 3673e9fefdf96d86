"""The metric protocol: Keras' stateful ``update_state`` / ``result`` / ``reset_state``, on the reward family.

A metric is a reward that is only reported. It keeps a running state (a
JSON dict, ``metric.variables[0]``) that each example updates::

    metric = F1Score()
    await metric.update_state(y_true, y_pred)    # or: score = await metric(y_true, y_pred)
    metric.result()                              # over every example seen since reset_state()

Each metric says what one example adds to the state (``example_state``),
how states add up (``merge``) and what a state is worth (``result_of``).
Training scores examples one by one (memoised, possibly on other workers);
History reports the mean of those per-example values.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from promptgym.modules.variable import Variable
from promptgym.rewards.base import JsonView, Reward, RewardResult
from promptgym.rewards.builtin import ExactMatch, MeanRewardWrapper


def merge_states(state: Any, update: Any) -> Any:
    """Add two states: numbers add up, dicts merge key by key (missing keys count as zero)."""
    if isinstance(state, dict) and isinstance(update, dict):
        merged = dict(state)
        for key, value in update.items():
            merged[key] = merge_states(merged[key], value) if key in merged else value
        return merged
    if isinstance(state, list) and isinstance(update, list):
        return [merge_states(a, b) for a, b in zip(state, update)]
    return state + update


def scalar(value: Any) -> float:
    """A result as one number (a per-field or per-label dict gives its mean)."""
    if isinstance(value, dict):
        return float(np.mean([scalar(item) for item in value.values()])) if value else 0.0
    return float(value)


class Metric(Reward):
    """Base of every metric; see the module docstring."""

    default_name = "metric"
    direction = "up"
    """Whether a higher result is better ("up") or worse ("down"): what EarlyStopping(mode="auto") reads."""

    def __init__(self, name: str | None = None, in_mask: list[str] | None = None, out_mask: list[str] | None = None,
                 in_mask_pattern: str | None = None, out_mask_pattern: str | None = None) -> None:
        super().__init__(in_mask=in_mask, out_mask=out_mask, name=name, in_mask_pattern=in_mask_pattern,
                         out_mask_pattern=out_mask_pattern)
        self._state = Variable(f"{self.name}/state", self.initial_state(), trainable=False)

    # -- what subclasses define -------------------------------------------------------------

    def initial_state(self) -> dict[str, Any]:
        return {"total": 0.0, "count": 0}

    async def example_state(self, y_true: JsonView | None, y_pred: JsonView | None) -> dict[str, Any]:
        """What one (masked) example adds to the state; by default its ``compute()`` score, for a mean."""
        if y_pred is None:
            return {"total": 0.0, "count": 1}
        result = await self.compute(y_true, y_pred)
        return {"total": float(result.score if isinstance(result, RewardResult) else result), "count": 1}

    def merge(self, state: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
        return merge_states(state, update)

    def result_of(self, state: dict[str, Any]) -> Any:
        return state["total"] / state["count"] if state.get("count") else 0.0

    # -- the Keras protocol -----------------------------------------------------------------

    @property
    def variables(self) -> list[Variable]:
        return [self._state]

    @property
    def state(self) -> dict[str, Any]:
        return self._state.get_json()

    async def update_state(self, y_true: Any, y_pred: Any) -> None:
        update = await self.example_state(self.mask(y_true), self.mask(y_pred))
        self._state.assign(self.merge(self._state.get_json(), update))

    def result(self) -> Any:
        return self.result_of(self._state.get_json())

    def reset_state(self) -> None:
        self._state.assign(self.initial_state())

    async def __call__(self, y_true: Any, y_pred: Any) -> Any:
        """Update with this example and return the running result."""
        await self.update_state(y_true, y_pred)
        return self.result()

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        """This example alone (what training records per example), as one number."""
        state = self.merge(self.initial_state(), await self.example_state(self.mask(y_true), self.mask(y_pred)))
        return RewardResult(scalar(self.result_of(state)))


class Mean(Metric):
    """The mean of values: ``await m.update_state([1, 3, 5, 7]); m.result() == 4.0``.

    Compiled on a program (``metrics=["mean"]``), the values are exact matches
    of the (masked) prediction: the share of fully correct predictions.
    """

    default_name = "mean"

    async def update_state(self, y_true: Any, y_pred: Any = None) -> None:
        if y_pred is None and not hasattr(y_true, "get_json") and not isinstance(y_true, dict):
            values = np.asarray(y_true, dtype=float).ravel()
            self._state.assign(self.merge(self.state, {"total": float(values.sum()), "count": int(values.size)}))
            return
        await super().update_state(y_true, y_pred)

    async def compute(self, y_true: JsonView | None, y_pred: JsonView) -> RewardResult:
        return await ExactMatch().compute(y_true, y_pred)


class Sum(Mean):
    """The sum of values: ``await m.update_state([1, 3, 5, 7]); m.result() == 16.0``."""

    default_name = "sum"

    def result_of(self, state: dict[str, Any]) -> Any:
        return float(state["total"])


class MeanMetricWrapper(MeanRewardWrapper, Metric):
    """Mean of an async (or plain) ``fn(y_true, y_pred) -> float``; register ``fn`` to save.

    The same wrapper as :class:`~promptgym.rewards.MeanRewardWrapper`, reported as a metric (named after ``fn``).
    """

    function_kind = "metric function"

    def __init__(self, fn: Callable[..., Any] | None = None, **options: Any) -> None:
        MeanRewardWrapper.__init__(self, fn, **options)
        self._state = Variable(f"{self.name}/state", self.initial_state(), trainable=False)

    def default_name_for(self, fn: Callable[..., Any]) -> str:
        return getattr(fn, "__name__", "metric")

    async def example_state(self, y_true: JsonView | None, y_pred: JsonView | None) -> dict[str, Any]:
        if y_pred is None:
            return {"total": 0.0, "count": 1}
        return {"total": (await MeanRewardWrapper.score(self, y_true, y_pred)).score, "count": 1}

    async def update_state(self, y_true: Any, y_pred: Any) -> None:
        # the wrapped function reads the masked values itself (MeanRewardWrapper.score masks)
        update = await self.example_state(y_true, y_pred)
        self._state.assign(self.merge(self.state, update))

    async def score(self, y_true: Any, y_pred: Any) -> RewardResult:
        return await MeanRewardWrapper.score(self, y_true, y_pred)
