"""What a ``fit()`` run spent, in dollars, by phase, across resumes; and the History keys that show it.

The run's spend is what it had spent before (a checkpoint's, when resumed)
plus the process ledger's growth since it started::

    spend = RunSpend.start(restored=None)
    ...calls...
    spend.logs()["cost_usd"]            # dollars so far, this run
    spend.state()                       # saved in the checkpoint's trainer state
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from promptgym.lm.usage import LEDGER, PHASES, Usage

SPEND_KEYS = ("cost_usd", "saved_usd", "unpriced_calls", "compute_s")


def total_of(by_phase: dict[str, Usage]) -> Usage:
    total = Usage()
    for usage in by_phase.values():
        total.add(usage)
    return total


@dataclass
class RunSpend:
    """Usage by phase of one run: ``before`` (restored) plus the ledger since ``ledger_start``."""

    before: dict[str, Usage] = field(default_factory=dict)
    ledger_start: dict[str, Usage] = field(default_factory=dict)

    @classmethod
    def start(cls, restored: dict[str, Any] | None) -> "RunSpend":
        """A run's spend, going on from ``restored`` (a trainer state's ``"spend"``) when resumed."""
        before = {}
        for phase, values in (restored or {}).items():
            known = {key: value for key, value in values.items() if key in Usage.__dataclass_fields__}
            before[phase] = Usage(**known)
        return cls(before, LEDGER.snapshot())

    def by_phase(self) -> dict[str, Usage]:
        result = {phase: Usage(**usage.as_dict()) for phase, usage in self.before.items()}
        for phase, usage in LEDGER.since(self.ledger_start).items():
            result.setdefault(phase, Usage()).add(usage)
        return result

    @property
    def spent_usd(self) -> float:
        return total_of(self.by_phase()).cost_usd

    def state(self) -> dict[str, dict[str, float]]:
        """JSON for the checkpoint: the usage fields that count money and compute, by phase."""
        return {phase: {key: getattr(usage, key) for key in (*SPEND_KEYS, "calls", "cache_hits", "prompt_tokens",
                                                             "completion_tokens")}
                for phase, usage in self.by_phase().items()}

    def logs(self) -> dict[str, float]:
        """The History keys, cumulative over the run: ``cost_usd``, ``cost_usd_<phase>``, ``saved_usd``,
        ``unpriced_calls`` (calls whose dollars are unknown) and ``compute_s`` (embedded seconds)."""
        by_phase = self.by_phase()
        total = total_of(by_phase)
        logs: dict[str, float] = {"cost_usd": total.cost_usd}
        for phase in PHASES:
            logs[f"cost_usd_{phase}"] = by_phase[phase].cost_usd if phase in by_phase else 0.0
        logs.update(saved_usd=total.saved_usd, unpriced_calls=total.unpriced_calls, compute_s=total.compute_s)
        return logs


def per_call_cost(tokens: Sequence[int | None], usd: Sequence[float | None]) -> dict[str, Any] | None:
    """Cost beside a score: mean tokens and dollars per call over the calls measured, and their dollars in all.

    Dollars are None when any call's price is unknown (a partial sum would read as a real figure).

    >>> per_call_cost([100, 300], [0.001, 0.003])
    {'tokens_per_call': 200.0, 'usd_per_call': 0.002, 'cost_usd': 0.004, 'calls': 2}
    """
    measured = [value for value in tokens if value is not None]
    if not measured:
        return None
    priced = all(value is not None for value in usd) and len(usd) == len(tokens)
    total = sum(float(value) for value in usd if value is not None) if priced else None
    return {"tokens_per_call": sum(measured) / len(measured),
            "usd_per_call": round(total / len(usd), 12) if total is not None else None,
            "cost_usd": round(total, 12) if total is not None else None, "calls": len(measured)}


def describe_call_cost(cost: dict[str, Any] | None) -> str:
    """``212 tokens/call, $0.000105/call`` from :func:`per_call_cost`'s dict; "" when not measured.

    >>> describe_call_cost({"tokens_per_call": 212.0, "usd_per_call": 0.000105}), describe_call_cost(None)
    ('212 tokens/call, $0.000105/call', '')
    """
    if not cost or cost.get("tokens_per_call") is None:
        return ""
    usd = cost.get("usd_per_call")
    return f"{cost['tokens_per_call']:.0f} tokens/call, " + (f"{format_usd(usd)}/call" if usd is not None
                                                              else "$ unknown/call")


def format_usd(value: float | None, unpriced_calls: int = 0) -> str:
    """``$0.0123``, marked when some calls had no price (their dollars are not in the figure).

    >>> format_usd(0.01234), format_usd(0.000123), format_usd(0.5, unpriced_calls=3)
    ('$0.0123', '$0.000123', '$0.5000 + unknown (3 unpriced calls)')
    """
    if value is None:
        return "unknown"
    # cheap models cost fractions of a cent a call: six decimals below a cent keep them readable
    text = f"${value:,.2f}" if value >= 100 else f"${value:.4f}" if value >= 0.01 or value == 0 else f"${value:.6f}"
    if unpriced_calls:
        text += f" + unknown ({int(unpriced_calls)} unpriced call{'s' if unpriced_calls != 1 else ''})"
    return text


@dataclass(frozen=True)
class CostEstimate:
    """A run's dollars, estimated from ``calls_sampled`` timed calls' prices and the run's call count.

    ``low_usd``/``high_usd``: the 95% interval of the mean price per call (a t interval), times ``calls``.
    """

    usd: float
    low_usd: float
    high_usd: float
    calls: int
    calls_sampled: int
    seconds_per_call: float | None = None

    def describe(self) -> str:
        """``$0.42 (95% interval $0.35-$0.49) for <= 1200 calls, from 8 timed calls``."""
        return (f"{format_usd(self.usd)} (95% interval {format_usd(self.low_usd)}-{format_usd(self.high_usd)}) for "
                f"<= {self.calls} calls, from {self.calls_sampled} timed call{'s' if self.calls_sampled != 1 else ''}"
                + (f" ({self.seconds_per_call:.2f} s each)" if self.seconds_per_call is not None else ""))


def estimate_cost(prices: list[float], calls: int, seconds: float | None = None) -> CostEstimate | None:
    """Scale the sampled prices per call to ``calls`` calls; None with no sample.

    >>> estimate_cost([0.001, 0.003], calls=100).usd
    0.2
    """
    if not prices:
        return None
    n = len(prices)
    mean = sum(prices) / n
    if n > 1:
        variance = sum((price - mean) ** 2 for price in prices) / (n - 1)
        half = _t95(n - 1) * math.sqrt(variance / n)
    else:
        half = mean  # one call: no spread to go on, say so with a wide interval
    return CostEstimate(round(mean * calls, 10), max(0.0, mean - half) * calls, (mean + half) * calls, calls, n,
                        seconds / n if seconds is not None else None)


def _t95(degrees: int) -> float:
    """Student's t, two-sided 95%, for small samples (between two rows, the wider one's; 1.96 past 60)."""
    table = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
             15: 2.13, 20: 2.09, 30: 2.04, 60: 2.00}
    if degrees > 60:
        return 1.96
    return table[max(limit for limit in table if limit <= degrees)]
