"""Running a program over many examples: concurrently, failures captured.

One bad answer never kills a batch: each example's exception becomes an
``Outcome`` with the error text. Real concurrency is bounded by each model's
semaphore, so gathering a whole batch is safe.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from promptgym.modules.tracing import Trace, tracing
from promptgym.lm.usage import lm_phase

logger = logging.getLogger("promptgym")


@dataclass
class Outcome:
    index: int
    prediction: Any = None
    error: str | None = None
    trace: Trace = field(default_factory=Trace)

    @property
    def ok(self) -> bool:
        return self.error is None


def as_object_array(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D object array (lists and arrays of DataModels accepted)."""
    if values is None:
        raise ValueError(f"{name} is required")
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1:
        return values
    array = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        array[i] = value
    return array


def validate_inputs(program: Any, x: Sequence[Any], name: str = "x") -> list[Any]:
    """Every input converted to the program's input DataModel; errors name the index and field."""
    validated = []
    for index, value in enumerate(x):
        try:
            validated.append(program.validate_input(value, index=index))
        except ValueError as error:
            raise ValueError(f"{name}[{index}]: {error}") from None
    return validated


async def run_one(program: Any, index: int, x: Any, training: bool = False) -> Outcome:
    with tracing() as trace, lm_phase("inference"):
        try:
            prediction = await program(x, training=training)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a failed example is data, not a crash
            message = f"{type(error).__name__}: {error}"
            logger.warning("example %d failed: %s", index, message)
            return Outcome(index, None, message, trace)
    return Outcome(index, prediction, None, trace)


async def run_many(program: Any, indexed_inputs: Sequence[tuple[int, Any]], training: bool = False,
                   on_done: Callable[[Outcome], Awaitable[None]] | None = None) -> list[Outcome]:
    """Run every input concurrently; ``on_done`` is awaited as each one finishes (for progress)."""

    async def one(index: int, x: Any) -> Outcome:
        outcome = await run_one(program, index, x, training)
        if on_done is not None:
            await on_done(outcome)
        return outcome

    return list(await asyncio.gather(*(one(i, x) for i, x in indexed_inputs)))
