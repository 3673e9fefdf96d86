"""Recording what each Generator saw and answered while one example runs.

The trainer opens a trace around each training example; optimizers turn the
traces of well-scored examples into few-shot demonstrations.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass
class TraceStep:
    module: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]


@dataclass
class Trace:
    steps: list[TraceStep] = field(default_factory=list)

    def for_module(self, module_name: str) -> list[TraceStep]:
        return [step for step in self.steps if step.module == module_name]


_current_trace: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("promptgym_trace", default=None)


@contextlib.contextmanager
def tracing() -> Iterator[Trace]:
    """Collect the steps of every module call made inside the block."""
    trace = Trace()
    token = _current_trace.set(trace)
    try:
        yield trace
    finally:
        _current_trace.reset(token)


def record_step(module: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
    trace = _current_trace.get()
    if trace is not None:
        trace.steps.append(TraceStep(module, inputs, outputs))
