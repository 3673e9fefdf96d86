"""``program.evaluate()``: mean reward and metrics over a labelled set."""

from __future__ import annotations

from typing import Any

from promptgym.rollouts import Outcome, RolloutService
from promptgym.rollouts.executor import Executor
from promptgym.stats import Evaluation
from promptgym.training.callback import CallbackList
from promptgym.training.data import as_object_array, validate_inputs, validate_targets
from promptgym.training.fit import require_compiled
from promptgym.training.logs import scored_evaluation
from promptgym.training.progress import ProgressBar


async def evaluate_program(program: Any, x: Any = None, y: Any = None, batch_size: int = 32, verbose: Any = "auto",
                           callbacks: list[Any] | None = None, max_errors: int | None = None,
                           executor: Executor | None = None) -> Evaluation:
    """``{"reward": ..., "<metric>": ...}`` averaged over the examples; failures score 0.

    The dict is an :class:`~promptgym.stats.Evaluation`: it keeps the per-example
    scores, for ``.interval()`` (95% confidence interval) and ``.compare(baseline)`` (paired test).

    Up to ``batch_size`` examples run at a time, in a sliding window: the
    next one starts as soon as one finishes.
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
    rollouts = RolloutService(program, compiled.reward, compiled.metrics, splits, executor=executor,
                              emit=callback_list.emit, max_errors=limit)
    batches = BatchCallbacks(callback_list, "test", len(xs), batch_size)
    await callback_list.call("on_test_begin", {"total": len(xs)})
    results = await rollouts.run("test", list(range(len(xs))), with_metrics=True, window=batch_size,
                                 on_done=batches.done)
    logs = scored_evaluation(results, compiled)
    await callback_list.call("on_test_end", logs)
    return logs


class BatchCallbacks:
    """Keras' per-batch hooks over a sliding window: a batch ends when all its examples (and earlier ones) are done."""

    def __init__(self, callbacks: CallbackList, stage: str, total: int, batch_size: int) -> None:
        self.callbacks, self.stage, self.total, self.batch_size = callbacks, stage, total, batch_size
        self.finished: set[int] = set()
        self.failures = 0
        self.next_batch = 0

    async def done(self, outcome: Outcome) -> None:
        self.finished.add(outcome.index)
        self.failures += outcome.error is not None
        await self.callbacks.call("on_example_end", self.stage, {"failures": self.failures})
        while self.next_batch * self.batch_size < self.total:
            start = self.next_batch * self.batch_size
            end = min(start + self.batch_size, self.total)
            if not all(i in self.finished for i in range(start, end)):
                break
            await self.callbacks.call(f"on_{self.stage}_batch_begin", self.next_batch, {"size": end - start})
            await self.callbacks.call(f"on_{self.stage}_batch_end", self.next_batch,
                                      {"done": end, "failures": self.failures})
            self.next_batch += 1
