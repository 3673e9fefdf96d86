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
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Iterator

PHASES = ("inference", "reward", "judge", "optimizer", "compute")
"""Where spend goes: the program's own calls, scoring, LM judges, optimizer proposals, weight training."""

_current_phase: contextvars.ContextVar[str | None] = contextvars.ContextVar("promptgym_lm_phase", default=None)
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
    total_tokens: int = 0  # prompt + completion (an embedding call: its input tokens); set by the model's record
    cached_tokens: int = 0  # prompt tokens the provider served from its prompt cache, when it says
    cache_creation_tokens: int = 0  # prompt tokens written to the provider's cache, when it says
    reasoning_tokens: int = 0  # completion tokens spent thinking, when the server says
    fallback_activations: int = 0  # failed calls that the model's fallback then answered
    trajectory_calls: int = 0  # streamed final answers of an agent trajectory
    trajectory_ttft_s: float = 0.0  # their seconds from the trajectory's start to the first chunk
    vectors: int = 0  # vectors an embedding model returned
    estimated_calls: int = 0  # calls whose tokens nobody counted (a stream with no usage chunk): estimated
    truncated_calls: int = 0  # answers the model stopped at max_tokens (finish_reason "length"): maybe cut short

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


PHASE_COUNTERS = {
    "calls": "calls", "prompt_tokens": "prompt_tokens", "completion_tokens": "completion_tokens",
    "tokens": "total_tokens", "elapsed_s": "latency_s", "cost": "cost", "cached_tokens": "cached_tokens",
    "cache_creation_tokens": "cache_creation_tokens", "reasoning_tokens": "reasoning_tokens",
    "failed_calls": "failures", "fallback_activations": "fallback_activations", "cache_hits": "cache_hits",
    "streaming_calls": "streaming_calls", "streaming_ttft_s": "ttft_s", "streaming_ttlt_s": "ttlt_s",
    "trajectory_calls": "trajectory_calls", "trajectory_ttft_s": "trajectory_ttft_s", "vectors": "vectors",
}
"""synalinks' counter suffixes (``lm.reward_cumulated_prompt_tokens``) -> the :class:`Usage` field each reads."""


class _PhaseCounter:
    """``model.<phase>_cumulated_<suffix>``: one counter of one phase of the model's ledger, readable and settable.

    ``calls`` are the calls that did not fail (synalinks counts failures apart, in ``failed_calls``).
    Setting one (synalinks' tests and tools do) writes the ledger, so every metric sees the same number.
    """

    def __init__(self, phase: str | None, suffix: str) -> None:
        self.phase, self.suffix, self.field = phase, suffix, PHASE_COUNTERS[suffix]

    def _usage(self, owner: "UsageCounters") -> Usage:
        if self.phase is None:
            return owner.usage.total()
        return owner.usage.by_phase.setdefault(self.phase, Usage())

    def __get__(self, owner: "UsageCounters | None", cls: type | None = None) -> object:
        if owner is None:
            return self
        usage = self._usage(owner)
        value = getattr(usage, self.field)
        return value - usage.failures if self.suffix == "calls" else value

    def __set__(self, owner: "UsageCounters", value: float) -> None:
        if self.phase is None:
            raise AttributeError(f"cumulated_{self.suffix} sums the phases: set <phase>_cumulated_{self.suffix}")
        usage = self._usage(owner)
        if self.suffix == "calls":
            value += usage.failures
        elif self.suffix == "failed_calls":  # a failed call is a call too: the successful ones stay as they are
            usage.calls += value - usage.failures
        setattr(usage, self.field, value)


class UsageCounters:
    """synalinks' names for a model's running totals (``lm.cumulated_calls``, ``lm.reward_cumulated_cost``...).

    All read ``self.usage``; the per-phase ones (``inference_``, ``reward_``, ``optimizer_``) can be set too.

    >>> from promptgym.testing import ScriptedLanguageModel
    >>> lm = ScriptedLanguageModel(responses=[])
    >>> lm.reward_cumulated_prompt_tokens = 12
    >>> lm.usage.by_phase["reward"].prompt_tokens
    12
    """

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


for _phase in (None, *PHASES):
    for _suffix in PHASE_COUNTERS:
        _name = f"{_phase}_cumulated_{_suffix}" if _phase else f"cumulated_{_suffix}"
        if _name not in vars(UsageCounters):
            setattr(UsageCounters, _name, _PhaseCounter(_phase, _suffix))


LEDGER = UsageLedger()
"""Every model call of the process, by phase."""


def current_phase() -> str:
    """The phase the calls made here count in (``inference`` outside any :func:`lm_phase`)."""
    return _current_phase.get() or "inference"


def current_op_scope() -> str | None:
    """The phase of the innermost :func:`lm_phase` open here; None outside any (synalinks' name)."""
    return _current_phase.get()


class _WallClock(threading.local):
    """Per-phase wall-clock seconds: only the phase on top of the stack accrues (its self time)."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.last: float | None = None
        self.wall: dict[str, float] = {phase: 0.0 for phase in PHASES}

    def credit(self, now: float) -> None:
        if self.stack and self.last is not None:
            self.wall[self.stack[-1]] = self.wall.get(self.stack[-1], 0.0) + now - self.last


_WALL = _WallClock()


def read_phase_wall_clock_s(phase: str) -> float:
    """Seconds spent inside ``lm_phase(phase)`` blocks (nested phases' time excluded) since :func:`reset_phase_wall_clock`."""
    return _WALL.wall.get(phase, 0.0)


def add_phase_wall_clock_s(phase: str, seconds: float) -> None:
    """Add ``seconds`` to ``phase``'s wall clock (for tests and for work timed elsewhere)."""
    _WALL.wall[phase] = _WALL.wall.get(phase, 0.0) + seconds


def reset_phase_wall_clock() -> None:
    """Start the per-phase wall clocks from zero (``clear_session()`` does it)."""
    _WALL.__init__()


class lm_phase(contextlib.ContextDecorator):  # noqa: N801 - used as a function: `with lm_phase("reward"):`
    """Attribute the LM calls made inside the block to ``phase``, and its wall-clock time (throughput metrics).

    The phase is a context variable, so tasks started inside inherit it.

    >>> with lm_phase("reward"):
    ...     current_phase()
    'reward'
    """

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self._tokens: list[contextvars.Token] = []

    def __enter__(self) -> "lm_phase":
        now = time.perf_counter()
        _WALL.credit(now)  # the enclosing phase's time up to here
        _WALL.stack.append(self.phase)
        _WALL.last = now
        self._tokens.append(_current_phase.set(self.phase))
        return self

    def __exit__(self, *exc_info: object) -> bool:
        now = time.perf_counter()
        _WALL.credit(now)
        if _WALL.stack:
            _WALL.stack.pop()
        _WALL.last = now
        _current_phase.reset(self._tokens.pop())
        return False


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


def record_in_scopes(usage: Usage, sampled: bool = True) -> None:
    """Add ``usage`` to every :func:`usage_scope` open here (models call this with each record).

    ``sampled=False`` keeps it out of :func:`cost_samples` (an embedding call: the preview prices chat calls).
    """
    for scope in _scopes.get():
        scope.add(usage)
    if sampled and usage.calls and not usage.failures:
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
