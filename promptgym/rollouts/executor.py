"""Executors: where rollouts run. The default runs them in this process, a window at a time.

A rollout is data in, data out: the program's input, the variable values to
run it with (or None for the program's own), and back a prediction or an
error, the trace of every Generator step, and (from another process) the
LM usage it caused. An executor never mutates the program, so several
candidates can run at the same time, and a remote executor (a Ray actor
holding its own copy of the program, built from its JSON) can run the same
rollouts elsewhere. See docs/rollouts.md for the contract.

    executor = InProcessExecutor()
    outcomes = await executor.run(program, [Rollout(0, x, variables)])
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence

from promptgym.lm.usage import Usage, lm_phase, usage_scope
from promptgym.modules.tracing import Trace, tracing
from promptgym.modules.variable import variable_values

logger = logging.getLogger("promptgym")

OnOutcome = Callable[["Outcome"], Awaitable[None]]
OnStart = Callable[["Rollout"], Awaitable[None]]


@dataclass
class Rollout:
    """One run of the program: an example's index (for reporting), its input, and the variable values to use."""

    index: int
    inputs: Any
    variables: dict[str, dict[str, Any]] | None = None


@dataclass
class Outcome:
    """What a rollout gave: a prediction or an error (never both), the trace, and remote LM usage by phase."""

    index: int
    prediction: Any = None
    error: str | None = None
    trace: Trace = field(default_factory=Trace)
    usage: dict[str, Usage] | None = None
    """LM usage by phase the rollout caused in another process (None in-process). A remote executor records
    it in this process's ``LEDGER`` before returning, so usage reports read the same wherever rollouts ran."""
    spent: Usage | None = None
    """The model usage of this rollout's own calls, wherever it ran (tokens, dollars; cache hits' tokens too):
    what the program costs per call, for the comparisons that weigh a candidate's score against it."""

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(Protocol):
    """Runs rollouts of a program; every rollout gets exactly one Outcome, in the order given."""

    async def run(self, program: Any, rollouts: Sequence[Rollout], training: bool = False,
                  window: int | None = None, on_start: OnStart | None = None,
                  on_done: OnOutcome | None = None) -> list[Outcome]: ...

    async def close(self) -> None: ...


async def run_rollout(program: Any, rollout: Rollout, training: bool = False) -> Outcome:
    """Run one rollout here; an exception becomes the outcome's error (a failed example is data, not a crash)."""
    with variable_values(rollout.variables), tracing() as trace, lm_phase("inference"), usage_scope() as spent:
        try:
            prediction = await program(rollout.inputs, training=training)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - one bad answer never kills a batch
            message = f"{type(error).__name__}: {error}"
            logger.warning("example %d failed: %s", rollout.index, message)
            return Outcome(rollout.index, None, message, trace, spent=spent)
    return Outcome(rollout.index, prediction, None, trace, spent=spent)


class InProcessExecutor:
    """Runs rollouts as asyncio tasks in this process, keeping up to ``window`` of them in flight.

    The window slides: a new rollout starts as soon as one finishes, so one
    slow rollout (a retried request) never holds the others back. Real
    concurrency is further bounded by each model's own limit (one call at a
    time for an embedded model, ``concurrency`` requests for a server).
    """

    def __init__(self, window: int | None = None) -> None:
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 or None, got {window}")
        self.window = window

    async def run(self, program: Any, rollouts: Sequence[Rollout], training: bool = False,
                  window: int | None = None, on_start: OnStart | None = None,
                  on_done: OnOutcome | None = None) -> list[Outcome]:
        limit = window or self.window or max(1, len(rollouts))
        slots = asyncio.Semaphore(limit)

        async def one(rollout: Rollout) -> Outcome:
            async with slots:
                if on_start is not None:
                    await on_start(rollout)
                outcome = await run_rollout(program, rollout, training)
                if on_done is not None:
                    await on_done(outcome)
                return outcome

        return list(await asyncio.gather(*(one(rollout) for rollout in rollouts)))

    async def close(self) -> None: ...


_default_executor: list[Executor] = [InProcessExecutor()]


def get_default_executor() -> Executor:
    """The executor ``fit``/``evaluate``/``predict`` use when none is given."""
    return _default_executor[0]


def set_default_executor(executor: Executor | None) -> Executor:
    """Make ``executor`` the default for every later ``fit``/``evaluate``/``predict``; None restores in-process.

    >>> set_default_executor(None)   # doctest: +ELLIPSIS
    <promptgym.rollouts.executor.InProcessExecutor object at ...>
    """
    _default_executor[0] = executor if executor is not None else InProcessExecutor()
    return _default_executor[0]
