"""``program.predict()``: batch inference with failures reported, not raised."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from promptgym.training.batch import as_object_array, run_many, validate_inputs
from promptgym.training.callback import CallbackList
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
                          callbacks: list[Any] | None = None) -> Predictions:
    inputs = validate_inputs(program, as_object_array(x, "x"))
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    callback_list = CallbackList(callbacks, program)
    if wants_progress(verbose):
        callback_list.append(ProgressBar(), program)
    results = np.empty(len(inputs), dtype=object).view(Predictions)
    results.failures = {}
    await callback_list.call("on_predict_begin", {"total": len(inputs)})
    failures = 0

    async def example_done(outcome: Any) -> None:
        nonlocal failures
        failures += outcome.error is not None
        await callback_list.call("on_example_end", "predict", {"failures": failures})

    for batch, start in enumerate(range(0, len(inputs), batch_size)):
        await callback_list.call("on_predict_batch_begin", batch, {"size": min(batch_size, len(inputs) - start)})
        indexed = [(i, inputs[i]) for i in range(start, min(start + batch_size, len(inputs)))]
        outcomes = await run_many(program, indexed, on_done=example_done)
        for outcome in outcomes:
            results[outcome.index] = outcome.prediction
            if outcome.error:
                results.failures[outcome.index] = outcome.error
        await callback_list.call("on_predict_batch_end", batch,
                                 {"done": min(start + batch_size, len(inputs)), "failures": len(results.failures)})
    if results.failures:
        indices = sorted(results.failures)
        logger.warning("%d of %d predictions failed (indices %s); they are None in the result, "
                       "see .failures for the errors", len(indices), len(inputs), indices[:20])
    await callback_list.call("on_predict_end", {"failures": len(results.failures)})
    return results
