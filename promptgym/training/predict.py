"""``program.predict()``: batch inference with failures reported, not raised."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from promptgym.rollouts import Rollout, get_default_executor
from promptgym.rollouts.executor import Executor
from promptgym.training.callback import CallbackList
from promptgym.training.data import as_object_array, validate_inputs
from promptgym.training.evaluate import BatchCallbacks
from promptgym.training.progress import ProgressBar

logger = logging.getLogger("promptgym")


class Predictions(np.ndarray):
    """An object array of predictions; ``failures`` maps index -> error for the None entries."""

    failures: dict[int, str]

    def __array_finalize__(self, obj: Any) -> None:
        self.failures = getattr(obj, "failures", {})


def wants_progress(verbose: Any) -> bool:
    return verbose not in (0, False, None, "0")


async def predict_program(program: Any, x: Any, batch_size: int = 32, verbose: Any = "auto",
                          callbacks: list[Any] | None = None, executor: Executor | None = None) -> Predictions:
    """Every input of ``x`` run, up to ``batch_size`` at a time in a sliding window (not lock-step batches)."""
    inputs = validate_inputs(program, as_object_array(x, "x"))
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    callback_list = CallbackList(callbacks, program)
    if wants_progress(verbose):
        callback_list.append(ProgressBar(), program)
    results = np.empty(len(inputs), dtype=object).view(Predictions)
    results.failures = {}
    await callback_list.call("on_predict_begin", {"total": len(inputs)})
    batches = BatchCallbacks(callback_list, "predict", len(inputs), batch_size)
    outcomes = await (executor or get_default_executor()).run(
        program, [Rollout(i, value) for i, value in enumerate(inputs)], window=batch_size, on_done=batches.done)
    for outcome in outcomes:
        results[outcome.index] = outcome.prediction
        if outcome.error:
            results.failures[outcome.index] = outcome.error
    if results.failures:
        indices = sorted(results.failures)
        logger.warning("%d of %d predictions failed (indices %s); they are None in the result, "
                       "see .failures for the errors", len(indices), len(inputs), indices[:20])
    await callback_list.call("on_predict_end", {"failures": len(results.failures)})
    return results
