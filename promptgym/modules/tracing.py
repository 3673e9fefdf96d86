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
    """One module call: its inputs and outputs as JSON, and the JSON schema of the inputs when it had one.

    The schema (with the fields' descriptions) is part of the prompt a Generator sends, so rebuilding that
    prompt from a trace (SFT rows from a program's runs) needs it, not a schema guessed from the values.
    """

    module: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    schema: dict[str, Any] | None = None

    def to_json(self) -> list[Any]:
        """``[module, inputs, outputs]``, plus the schema when there is one.

        >>> TraceStep("answer", {"q": "1+1"}, {"a": "2"}).to_json()
        ['answer', {'q': '1+1'}, {'a': '2'}]
        """
        item = [self.module, self.inputs, self.outputs]
        return item + [self.schema] if self.schema is not None else item

    @classmethod
    def from_json(cls, item: list[Any]) -> "TraceStep":
        """The step :meth:`to_json` wrote (results saved before schemas were recorded have three items)."""
        return cls(*item)


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


def record_step(module: str, inputs: dict[str, Any], outputs: dict[str, Any],
                schema: dict[str, Any] | None = None) -> None:
    trace = _current_trace.get()
    if trace is not None:
        trace.steps.append(TraceStep(module, inputs, outputs, schema))
