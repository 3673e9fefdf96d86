"""Counting what models cost: calls, tokens, latency, cache hits, by phase.

The phase (``inference``, ``reward``, ``optimizer``) is a context variable, so
the trainer can attribute a reward's LM calls to the reward phase without
passing anything through user code::

    with lm_phase("reward"):
        await judge(...)
    LEDGER.snapshot()["reward"].calls
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import asdict, dataclass, field, fields
from typing import Iterator

PHASES = ("inference", "reward", "judge", "optimizer", "compute")
"""Where spend goes: the program's own calls, scoring, LM judges, optimizer proposals, weight training."""

_current_phase: contextvars.ContextVar[str] = contextvars.ContextVar("promptgym_lm_phase", default="inference")
_scopes: contextvars.ContextVar[tuple["Usage", ...]] = contextvars.ContextVar("promptgym_usage_scopes", default=())
_samples: contextvars.ContextVar[tuple[list[float], ...]] = contextvars.ContextVar("promptgym_cost_samples", default=())


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0
    failures: int = 0
    cost: float = 0.0  # what the server billed, when it says (usage.cost); 0 for the embedded engine
    streaming_calls: int = 0  # streamed answers read to the end
    ttft_s: float = 0.0  # their summed seconds to the first chunk
    ttlt_s: float = 0.0  # and to the last
    cost_usd: float = 0.0  # dollars, from the model's price (or what the server billed); calls that reached it
    saved_usd: float = 0.0  # what cache hits would have cost
    unpriced_calls: int = 0  # calls of models with no known price: their dollars are unknown, not $0
    compute_s: float = 0.0  # seconds of embedded (or weight-training) compute, which costs no dollars

    def add(self, other: "Usage") -> None:
        for name in _USAGE_FIELDS:  # field by field, not asdict(): every model call adds two or three of these
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def minus(self, other: "Usage") -> "Usage":
        return Usage(**{name: value - getattr(other, name) for name, value in asdict(self).items()})

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


_USAGE_FIELDS = tuple(item.name for item in fields(Usage))


@dataclass
class UsageLedger:
    """Usage per phase, for one model or for the whole process."""

    by_phase: dict[str, Usage] = field(default_factory=dict)

    def record(self, usage: Usage, phase: str | None = None) -> None:
        self.by_phase.setdefault(phase or current_phase(), Usage()).add(usage)

    def total(self) -> Usage:
        result = Usage()
        for usage in self.by_phase.values():
            result.add(usage)
        return result

    def snapshot(self) -> dict[str, Usage]:
        return {phase: Usage(**usage.as_dict()) for phase, usage in self.by_phase.items()}

    def since(self, snapshot: dict[str, Usage]) -> dict[str, Usage]:
        """Usage per phase accumulated after ``snapshot`` was taken."""
        return {
            phase: usage.minus(snapshot.get(phase, Usage()))
            for phase, usage in self.by_phase.items()
        }


class UsageCounters:
    """synalinks' names for a model's running totals (``lm.cumulated_calls``...), read from ``self.usage``."""

    usage: UsageLedger

    @property
    def cumulated_calls(self) -> int:
        """Calls that reached the model (cache hits not counted)."""
        total = self.usage.total()
        return total.calls - total.cache_hits

    @property
    def cumulated_cache_hits(self) -> int:
        return self.usage.total().cache_hits

    @property
    def cumulated_prompt_tokens(self) -> int:
        return self.usage.total().prompt_tokens

    @property
    def cumulated_completion_tokens(self) -> int:
        return self.usage.total().completion_tokens

    @property
    def cumulated_failures(self) -> int:
        return self.usage.total().failures

    @property
    def cumulated_cost(self) -> float:
        """What the servers billed, when they say (0 for the embedded engine)."""
        return float(self.usage.total().cost)

    @property
    def cumulated_streaming_calls(self) -> int:
        """Streamed answers read to the end (one abandoned half-way is not counted)."""
        return self.usage.total().streaming_calls

    @property
    def cumulated_streaming_ttft_s(self) -> float:
        return self.usage.total().ttft_s

    @property
    def cumulated_streaming_ttlt_s(self) -> float:
        return self.usage.total().ttlt_s


LEDGER = UsageLedger()
"""Every model call of the process, by phase."""


def current_phase() -> str:
    return _current_phase.get()


@contextlib.contextmanager
def lm_phase(phase: str) -> Iterator[None]:
    """Attribute the LM calls made inside the block to ``phase``."""
    token = _current_phase.set(phase)
    try:
        yield
    finally:
        _current_phase.reset(token)


@contextlib.contextmanager
def usage_scope() -> Iterator[Usage]:
    """Count the model usage of the calls made inside the block, tasks it starts included.

    A served request or a traced module call reads its own calls and tokens this way, whatever
    else runs concurrently on the same models; scopes nest (an outer one counts the inner's calls too)::

        with usage_scope() as usage:
            await program(inputs)
        usage.calls, usage.prompt_tokens
    """
    usage = Usage()
    token = _scopes.set((*_scopes.get(), usage))
    try:
        yield usage
    finally:
        _scopes.reset(token)


def record_in_scopes(usage: Usage) -> None:
    """Add ``usage`` to every :func:`usage_scope` open here (models call this with each record)."""
    for scope in _scopes.get():
        scope.add(usage)
    if usage.calls and not usage.failures:
        for samples in _samples.get():
            samples.append(usage.cost_usd + usage.saved_usd)


@contextlib.contextmanager
def cost_samples() -> Iterator[list[float]]:
    """Each answered call's price inside the block, cache hits at what they would have cost (a preview's sample)::

        with cost_samples() as prices:
            await program(inputs)
        sum(prices) / len(prices)   # dollars per call
    """
    samples: list[float] = []
    token = _samples.set((*_samples.get(), samples))
    try:
        yield samples
    finally:
        _samples.reset(token)


def record_compute(seconds: float) -> None:
    """Count ``seconds`` of weight training (SFT, RL) as ``compute``: they cost no dollars, and show as ``compute_s``."""
    usage = Usage(compute_s=float(seconds))
    LEDGER.record(usage, phase="compute")
    record_in_scopes(usage)
