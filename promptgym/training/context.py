"""What an optimizer sees of training: scored runs of the program, data splits, events.

Optimizers never touch the trainer's loop; they ask the context to run the
program with given variable values on given examples, and get rewards,
feedback and traces back. Scores are memoised per (variables, split, example),
so re-scoring a candidate on an example it has seen costs no LM call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator, Sequence

import numpy as np

from promptgym.core.events import Event, ExampleFailed
from promptgym.lm.usage import lm_phase
from promptgym.modules.tracing import Trace
from promptgym.training.batch import run_many

logger = logging.getLogger("promptgym")


class TrainingAborted(RuntimeError):
    """Too many examples failed (more than ``max_errors``)."""


@dataclass
class ExampleResult:
    index: int
    split: str
    prediction: Any
    reward: float
    feedback: str = ""
    error: str | None = None
    trace: Trace = field(default_factory=Trace)
    metrics: dict[str, float] = field(default_factory=dict)


def variables_key(variables: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(variables, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


@contextlib.contextmanager
def assigned(program: Any, variables: dict[str, Any] | None) -> Iterator[None]:
    """Temporarily give ``program`` these variable values."""
    if variables is None:
        yield
        return
    saved = {variable.name: variable.get_json() for variable in program.variables if variable.name in variables}
    by_name = {variable.name: variable for variable in program.variables}
    for name, value in variables.items():
        by_name[name].assign(value)
    try:
        yield
    finally:
        for name, value in saved.items():
            by_name[name].assign(value)


class TrainingContext:
    """Runs and scores the program for the optimizer, and counts failures."""

    def __init__(self, program: Any, compiled: Any, splits: dict[str, tuple[Sequence[Any], Sequence[Any]]],
                 minibatch_size: int, rng: np.random.Generator, callbacks: Any, max_errors: int) -> None:
        self.program = program
        self.reward = compiled.reward
        self.metrics = compiled.metrics
        self.splits = splits
        self.minibatch_size = minibatch_size
        self.rng = rng
        self.callbacks = callbacks
        self.max_errors = max_errors
        self.errors = 0
        self.epoch = 0
        self.epochs = 1
        """Total epochs of this fit() (optimizers pace budgets with it)."""
        self.steps = 1
        """Training steps per epoch."""
        self.step = 0
        self.step_results: dict[int, ExampleResult] = {}
        """Training-split results the optimizer got during the current step (the trainer logs them)."""
        self._memo: dict[tuple[str, str, int], ExampleResult] = {}
        self._held_out_order: list[int] | None = None

    def size(self, split: str) -> int:
        return len(self.splits[split][0])

    def validation_split(self) -> str:
        return "val" if self.size("val") else "train"

    def held_out_order(self) -> list[int]:
        """The training examples in one seeded order, fixed for the whole fit.

        Optimizers that need training examples beyond the validation set take
        them in this order, so every comparison uses the same ones and the
        scores already paid for are reused.
        """
        if self._held_out_order is None:
            self._held_out_order = [int(i) for i in self.rng.permutation(self.size("train"))]
        return self._held_out_order

    def validation_minibatch(self, size: int | None = None) -> list[int]:
        split = self.validation_split()
        count = min(size or self.minibatch_size, self.size(split))
        return sorted(self.rng.choice(self.size(split), size=count, replace=False).tolist())

    def pending(self, split: str, indices: Sequence[int], variables: dict[str, Any] | None = None) -> list[int]:
        """The examples of ``indices`` that ``run`` would really run (the others are memoised)."""
        key = variables_key(variables if variables is not None else self.program.get_variables())
        return [i for i in dict.fromkeys(indices) if (key, split, i) not in self._memo]

    async def emit(self, event: Event) -> None:
        await self.callbacks.emit(event)

    async def run(self, split: str, indices: Sequence[int], variables: dict[str, Any] | None = None,
                  with_metrics: bool = False, on_done: Callable[[Any], Awaitable[None]] | None = None
                  ) -> list[ExampleResult]:
        """Run and score examples ``indices`` of ``split`` with ``variables`` (default: current values)."""
        key = variables_key(variables if variables is not None else self.program.get_variables())
        xs, ys = self.splits[split]
        todo = self.pending(split, indices, variables)
        with assigned(self.program, variables):
            outcomes = await run_many(self.program, [(i, xs[i]) for i in todo], training=True, on_done=on_done)
        for outcome in outcomes:
            with lm_phase("reward"):
                scored = await self.reward.score(ys[outcome.index], outcome.prediction)
            result = ExampleResult(outcome.index, split, outcome.prediction, scored.score, scored.feedback,
                                   outcome.error, outcome.trace)
            self._memo[(key, split, outcome.index)] = result
            if outcome.error:
                await self._count_failure(result)
        results = [self._memo[(key, split, i)] for i in indices]
        if split == "train":
            self.step_results.update((result.index, result) for result in results)
        if with_metrics:
            await self.add_metrics(results)
        return results

    async def add_metrics(self, results: Sequence[ExampleResult]) -> None:
        """Score the compiled metrics on results that have none yet (monitoring only)."""
        for result in results:
            if self.metrics and not result.metrics:
                with lm_phase("reward"):
                    for metric in self.metrics:
                        target = self.splits[result.split][1][result.index]
                        result.metrics[metric.name] = (await metric.score(target, result.prediction)).score

    async def _count_failure(self, result: ExampleResult) -> None:
        self.errors += 1
        await self.emit(ExampleFailed(split=result.split, index=result.index, error=result.error or ""))
        if self.errors > self.max_errors:
            raise TrainingAborted(
                f"{self.errors} examples failed, more than max_errors={self.max_errors}; "
                f"last: {result.split} example {result.index}: {result.error}"
            )
