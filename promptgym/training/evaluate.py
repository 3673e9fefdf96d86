"""``program.evaluate()``: mean reward and metrics over a labelled set."""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.training.batch import as_object_array, validate_inputs
from promptgym.training.callback import CallbackList
from promptgym.training.context import ExampleResult, TrainingContext
from promptgym.stats import Evaluation
from promptgym.training.fit import require_compiled
from promptgym.training.progress import ProgressBar
from promptgym.training.targets import validate_targets


async def evaluate_program(program: Any, x: Any = None, y: Any = None, batch_size: int = 32, verbose: Any = "auto",
                           callbacks: list[Any] | None = None, max_errors: int | None = None) -> Evaluation:
    """``{"reward": ..., "<metric>": ...}`` averaged over the examples; failures score 0.

    The dict is an :class:`~promptgym.stats.Evaluation`: it keeps the per-example
    scores, for ``.interval()`` (95% confidence interval) and ``.compare(baseline)`` (paired test).
    """
    compiled = require_compiled(program, "evaluate")
    xs, ys = as_object_array(x, "x"), as_object_array(y, "y")
    if len(xs) != len(ys):
        raise ValueError(f"x and y have different lengths ({len(xs)} and {len(ys)})")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    splits = {"test": (validate_inputs(program, xs, "x"), validate_targets(program, ys, "y"))}
    callback_list = CallbackList(callbacks, program)
    if verbose not in (0, False, None):
        callback_list.append(ProgressBar(), program)
    limit = max_errors if max_errors is not None else len(xs) + 1
    ctx = TrainingContext(program, compiled, splits, 1, np.random.default_rng(0), callback_list, limit)
    await callback_list.call("on_test_begin", {"total": len(xs)})
    results: list[ExampleResult] = []

    async def example_done(outcome: Any) -> None:
        await callback_list.call("on_example_end", "test", {})

    for batch, start in enumerate(range(0, len(xs), batch_size)):
        await callback_list.call("on_test_batch_begin", batch, {})
        indices = list(range(start, min(start + batch_size, len(xs))))
        results += await ctx.run("test", indices, with_metrics=True, on_done=example_done)
        await callback_list.call("on_test_batch_end", batch, {"done": len(results)})
    names = [compiled.reward.name, *(metric.name for metric in compiled.metrics)]
    logs = Evaluation({names[0]: [r.reward for r in results],
                       **{name: [r.metrics.get(name, 0.0) for r in results] for name in names[1:]}})
    await callback_list.call("on_test_end", logs)
    return logs
