"""The rollout service: run the program on examples with given variable values, score, memoise, count failures.

Optimizers, ``fit()`` and ``evaluate()`` ask it for scored results and never
touch the program or the data splits themselves::

    rollouts = RolloutService(program, reward, metrics, {"train": (x, y), "val": (x_val, y_val)})
    results = await rollouts.run("val", [0, 1, 2], variables=candidate.variables)
    results[0].reward, results[0].feedback, results[0].trace

A result is memoised per (variables, split, example): asking again costs no
LM call. A rollout that fails (an LM error, an unparseable answer, a reward
that raises or returns NaN) is a result with ``error`` set and reward 0; the
service counts distinct failed examples and raises :class:`TrainingAborted`
past ``max_errors``. docs/rollouts.md is the contract.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from promptgym.core.events import Event, ExampleFailed
from promptgym.lm.usage import lm_phase
from promptgym.modules.model_choice import MODELS_KEY, current_models
from promptgym.modules.tracing import Trace, TraceStep
from promptgym.rewards.base import to_json
from promptgym.rollouts.executor import Executor, OnOutcome, Outcome, Rollout, get_default_executor

logger = logging.getLogger("promptgym")

Split = tuple[Sequence[Any], Sequence[Any]]
Emit = Callable[[Event], Awaitable[None]]


class TrainingAborted(RuntimeError):
    """Too many examples failed (more than ``max_errors``)."""


@dataclass
class ExampleResult:
    """One scored rollout: the prediction (or the error), its reward and feedback, the trace, the metrics."""

    index: int
    split: str
    prediction: Any
    reward: float
    feedback: str = ""
    error: str | None = None
    trace: Trace = field(default_factory=Trace)
    metrics: dict[str, float] = field(default_factory=dict)
    tokens: int | None = None
    """Prompt + completion tokens of the program's model calls for this example (None: not measured)."""
    usd: float | None = None
    """What those calls cost in dollars, a cached answer at its price (None: not measured, or a model unpriced)."""


def variables_key(variables: dict[str, Any]) -> str:
    """A short stable key of variable values (the memo's first coordinate)."""
    return hashlib.sha256(json.dumps(variables, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


async def _no_events(event: Event) -> None: ...


class RolloutService:
    """Runs and scores one program on named data splits (``"train"``, ``"val"``, ``"test"``, ...)."""

    def __init__(self, program: Any, reward: Any, metrics: Sequence[Any], splits: dict[str, Split], *,
                 executor: Executor | None = None, emit: Emit | None = None, max_errors: int | None = None,
                 rng: np.random.Generator | None = None, minibatch_size: int = 4) -> None:
        self.program = program
        self.reward = reward
        self.metrics = list(metrics)
        self.splits = {name: (list(xs), list(ys)) for name, (xs, ys) in splits.items()}
        self.executor = executor or get_default_executor()
        self.emit = emit or _no_events
        self.max_errors = max_errors
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.minibatch_size = minibatch_size
        self.failed: set[tuple[str, int]] = set()
        """Distinct (split, example) pairs whose rollout failed at least once."""
        self.failure_log: list[tuple[str, int]] = []
        """Every failure, in order (the trainer counts an epoch's distinct failures from it)."""
        self.train_results: dict[int, ExampleResult] = {}
        """Training-split results handed out since :meth:`start_step` (the trainer logs them)."""
        self._memo: dict[tuple[str, str, int], ExampleResult] = {}
        self._start_models = current_models(program)
        self._held_out_order: list[int] | None = None

    # -- the data -------------------------------------------------------------------------

    def size(self, split: str) -> int:
        return len(self.splits[split][0])

    def inputs(self, split: str, indices: Sequence[int] | None = None) -> list[Any]:
        xs = self.splits[split][0]
        return list(xs) if indices is None else [xs[i] for i in indices]

    def targets(self, split: str, indices: Sequence[int] | None = None) -> list[Any]:
        ys = self.splits[split][1]
        return list(ys) if indices is None else [ys[i] for i in indices]

    def target_json(self, split: str, index: int) -> dict[str, Any]:
        """An example's label as a JSON dict."""
        return to_json(self.splits[split][1][index]) or {}

    def validation_split(self) -> str:
        """``"val"`` when there is validation data, else ``"train"``."""
        return "val" if self.size("val") else "train"

    def held_out_order(self) -> list[int]:
        """The training examples in one seeded order, fixed for the service's life (one ``fit()``).

        Optimizers that need training examples beyond the validation set take
        them in this order, so every comparison uses the same ones and the
        scores already paid for are reused.
        """
        if self._held_out_order is None:
            self._held_out_order = [int(i) for i in self.rng.permutation(self.size("train"))]
        return self._held_out_order

    def validation_minibatch(self, size: int | None = None) -> list[int]:
        """``size`` (default ``minibatch_size``) validation examples drawn without replacement, sorted."""
        split = self.validation_split()
        count = min(size or self.minibatch_size, self.size(split))
        return sorted(self.rng.choice(self.size(split), size=count, replace=False).tolist())

    # -- running --------------------------------------------------------------------------

    def _key(self, variables: dict[str, Any] | None) -> str:
        values = dict(variables if variables is not None else self.program.get_variables())
        # the models the program runs on are part of what is memoised (a tuned model is another program);
        # on the models the fit started with, the key is the plain variables' (as saved runs have it)
        models = {**current_models(self.program), **(values.pop(MODELS_KEY, None) or {})}
        if models != self._start_models:
            values[MODELS_KEY] = models
        return variables_key(values)

    def pending(self, split: str, indices: Sequence[int], variables: dict[str, Any] | None = None) -> list[int]:
        """The examples of ``indices`` that :meth:`run` would really run (the others are memoised)."""
        key = self._key(variables)
        return [i for i in dict.fromkeys(indices) if (key, split, i) not in self._memo]

    def forget_results(self) -> None:
        """Forget every memoised result: the program changed in a way its variables' values do not key (a
        retriever's query adapter, which is not trainable, see EmbedderTuning), so what was run is stale."""
        self._memo.clear()
        self.train_results = {}

    def start_step(self) -> None:
        """Forget the training results handed out so far (the trainer calls this before each step)."""
        self.train_results = {}

    async def run(self, split: str, indices: Sequence[int], variables: dict[str, Any] | None = None,
                  with_metrics: bool = False, on_done: OnOutcome | None = None,
                  window: int | None = None) -> list[ExampleResult]:
        """Scored results of examples ``indices`` of ``split`` run with ``variables`` (default: the program's own).

        Only the examples not memoised run, through the executor, at most
        ``window`` at a time. Results come back in the order of ``indices``.
        """
        key = self._key(variables)
        xs, ys = self.splits[split]
        todo = self.pending(split, indices, variables)
        rollouts = [Rollout(i, xs[i], variables) for i in todo]
        outcomes = await self.executor.run(self.program, rollouts, training=True, window=window, on_done=on_done)
        for outcome in outcomes:
            result = await self._score(split, outcome, ys[outcome.index])
            self._memo[(key, split, outcome.index)] = result
            if result.error:
                await self._count_failure(result)
        results = [self._memo[(key, split, i)] for i in indices]
        if split == "train":
            self.train_results.update((result.index, result) for result in results)
        if with_metrics:
            await self.add_metrics(results)
        return results

    async def _score(self, split: str, outcome: Outcome, target: Any) -> ExampleResult:
        result = ExampleResult(outcome.index, split, outcome.prediction, 0.0, error=outcome.error, trace=outcome.trace)
        if outcome.spent is not None:
            spent = outcome.spent
            result.tokens = spent.prompt_tokens + spent.completion_tokens
            result.usd = None if spent.unpriced_calls else spent.cost_usd + spent.saved_usd
        try:
            with lm_phase("reward"):
                scored = await self.reward.score(target, outcome.prediction)
            value = float(scored.score)
        except Exception as error:  # noqa: BLE001 - a reward that fails on one example fails that example only
            result.error = result.error or f"reward {self.reward.name!r} failed: {type(error).__name__}: {error}"
            return result
        if not math.isfinite(value):
            result.error = result.error or f"reward {self.reward.name!r} returned {value!r}, not a finite number"
            return result
        result.reward, result.feedback = value, scored.feedback
        return result

    async def add_metrics(self, results: Sequence[ExampleResult]) -> None:
        """Score the metrics on results that have none yet (monitoring only; a failing metric scores 0)."""
        for result in results:
            if not self.metrics or result.metrics:
                continue
            target = self.splits[result.split][1][result.index]
            with lm_phase("reward"):
                for metric in self.metrics:
                    try:
                        value = float((await metric.score(target, result.prediction)).score)
                    except Exception as error:  # noqa: BLE001 - monitoring never stops training
                        logger.warning("metric %s failed on %s example %d: %s: %s", metric.name, result.split,
                                       result.index, type(error).__name__, error)
                        value = 0.0
                    result.metrics[metric.name] = value if math.isfinite(value) else 0.0

    # -- state ----------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """What a resumed ``fit()`` needs to go on as if never stopped: every memoised result, the models the
        fit started on (the memo's keys are relative to them), the failed examples, the held-out order and the
        random generator's state (JSON)."""
        return {
            "memo": [{"key": key, "split": split, "index": index, **result_to_json(result)}
                     for (key, split, index), result in self._memo.items()],
            "start_models": dict(self._start_models),
            "failed": sorted([split, index] for split, index in self.failed),
            "held_out_order": self._held_out_order,
            "rng": json.loads(json.dumps(self.rng.bit_generator.state)),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        output = getattr(self.program, "output_data_model", None)
        self._memo = {(item["key"], item["split"], int(item["index"])): result_from_json(item, output)
                      for item in state.get("memo", [])}
        self.failed = {(split, int(index)) for split, index in state.get("failed", [])}
        # a resumed fit may start on other models (a FineTune stage's tuned one): the keys stay the first run's
        if isinstance(state.get("start_models"), dict):
            self._start_models = dict(state["start_models"])
        order = state.get("held_out_order")
        self._held_out_order = [int(i) for i in order] if order is not None else None
        if state.get("rng") is not None:
            self.rng.bit_generator.state = state["rng"]

    async def _count_failure(self, result: ExampleResult) -> None:
        self.failed.add((result.split, result.index))
        self.failure_log.append((result.split, result.index))
        await self.emit(ExampleFailed(split=result.split, index=result.index, error=result.error or ""))
        if self.max_errors is not None and len(self.failed) > self.max_errors:
            raise TrainingAborted(
                f"{len(self.failed)} examples failed, more than max_errors={self.max_errors}; "
                f"last: {result.split} example {result.index}: {result.error}"
            )


def result_to_json(result: ExampleResult) -> dict[str, Any]:
    return {"prediction": to_json(result.prediction), "reward": result.reward, "feedback": result.feedback,
            "error": result.error, "metrics": dict(result.metrics),
            "trace": [step.to_json() for step in result.trace.steps],
            **({"tokens": result.tokens} if result.tokens is not None else {}),
            **({"usd": result.usd} if result.usd is not None else {})}


def result_from_json(item: dict[str, Any], output: Any = None) -> ExampleResult:
    """A saved result; its prediction becomes the program's output DataModel again when the program has one."""
    prediction = item.get("prediction")
    if prediction is not None and output is not None:
        prediction = output.model_validate(prediction)
    trace = Trace([TraceStep.from_json(step) for step in item.get("trace", [])])
    return ExampleResult(int(item["index"]), item["split"], prediction, float(item["reward"]),
                         item.get("feedback", ""), item.get("error"), trace, dict(item.get("metrics", {})),
                         item.get("tokens"), item.get("usd"))
