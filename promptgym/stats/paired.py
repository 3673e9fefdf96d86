"""Before/after on the same examples: the difference, its interval, and a p-value.

Scores that are all 0 or 1 (exact match and the like) get McNemar's exact test:
only the examples that changed verdict count, and under "no difference" a win
is as likely as a loss; the interval of the difference is Newcombe's hybrid
score interval for paired proportions (Wilson intervals of both means, joined
with their correlation). Other scores get a paired bootstrap: the percentile
interval of the mean per-example difference, and a p-value from the
differences re-centred on zero.

    >>> before = [0] * 20 + [1] * 20
    >>> after = [1] * 12 + [0] * 8 + [1] * 20     # 12 wins, 0 losses
    >>> test = paired_test(before, after)
    >>> test.method, test.wins, test.losses, round(test.difference, 2)
    ('mcnemar-exact', 12, 0, 0.3)
    >>> test.p_value < 0.001, test.significant
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from promptgym.stats.intervals import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    as_scores,
    check_level,
    is_binary,
    percentile_bounds,
    resampled_means,
    wilson_bounds,
)


@dataclass(frozen=True)
class PairedTest:
    """After minus before on ``n`` shared examples.

    ``difference`` is the mean per-example change, ``[low, high]`` its ``level``
    bootstrap interval, ``p_value`` the two-sided probability of a change at least
    this large if the two programs were equally good. ``wins`` / ``losses`` count
    the examples where after scored higher / lower.
    """

    difference: float
    low: float
    high: float
    p_value: float
    n: int
    wins: int
    losses: int
    method: str
    level: float = DEFAULT_LEVEL

    @property
    def significant(self) -> bool:
        """True when the interval of the difference excludes zero and p < 1 - level."""
        return self.p_value < 1 - self.level and (self.low > 0 or self.high < 0)

    def verdict(self) -> str:
        if not self.significant:
            return "within noise"
        return "better" if self.difference > 0 else "worse"

    def as_dict(self) -> dict[str, float | int | str]:
        return {"difference": self.difference, "low": self.low, "high": self.high, "p_value": self.p_value,
                "n": self.n, "wins": self.wins, "losses": self.losses, "method": self.method, "level": self.level}

    def brief(self) -> str:
        """``"+0.300 [+0.130, +0.470], p=0.002"``."""
        return f"{self.difference:+.3f} [{self.low:+.3f}, {self.high:+.3f}], {format_p(self.p_value)}"

    def __str__(self) -> str:
        return f"{self.brief()} ({self.wins} better, {self.losses} worse of {self.n}; {self.method}): {self.verdict()}"


def format_p(p_value: float) -> str:
    """``"p=0.012"``, or ``"p<0.001"``."""
    return "p<0.001" if p_value < 0.001 else f"p={p_value:.3f}"


def mcnemar_exact_p(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of ``wins`` vs ``losses`` at 1/2."""
    discordant = wins + losses
    if discordant == 0:
        return 1.0
    tail = sum(math.comb(discordant, k) for k in range(min(wins, losses) + 1)) / 2 ** discordant
    return min(1.0, 2 * tail)


def bootstrap_p(differences: np.ndarray, resamples: int, seed: int) -> float:
    """Two-sided paired bootstrap p-value: resample the differences centred on zero (the null)."""
    observed = abs(differences.mean())
    if observed == 0:
        return 1.0
    null_means = resampled_means(differences - differences.mean(), resamples, seed + 1)
    return float((np.sum(np.abs(null_means) >= observed - 1e-12) + 1) / (resamples + 1))


def newcombe_paired_bounds(before: np.ndarray, after: np.ndarray, level: float) -> tuple[float, float]:
    """Newcombe's (1998) hybrid score interval for ``mean(after) - mean(before)`` on paired 0/1 scores."""
    n = len(before)
    both = int(((before == 1) & (after == 1)).sum())
    only_after = int(((before == 0) & (after == 1)).sum())
    only_before = int(((before == 1) & (after == 0)).sum())
    neither = n - both - only_after - only_before
    p_after, p_before = (both + only_after) / n, (both + only_before) / n
    low_after, high_after = wilson_bounds(both + only_after, n, level)
    low_before, high_before = wilson_bounds(both + only_before, n, level)
    margins = (both + only_after) * (neither + only_before) * (both + only_before) * (neither + only_after)
    agreement = both * neither - only_after * only_before
    if agreement > 0:  # Newcombe's correction: without it no discordant pair at all gives a zero-width interval
        agreement = max(agreement - n / 2, 0.0)
    phi = agreement / math.sqrt(margins) if margins else 0.0
    below = math.sqrt(max(0.0, (p_after - low_after) ** 2 - 2 * phi * (p_after - low_after) * (high_before - p_before)
                          + (high_before - p_before) ** 2))
    above = math.sqrt(max(0.0, (high_after - p_after) ** 2 - 2 * phi * (high_after - p_after) * (p_before - low_before)
                          + (p_before - low_before) ** 2))
    difference = p_after - p_before
    return max(-1.0, difference - below), min(1.0, difference + above)


def paired_test(before: Sequence[float | None], after: Sequence[float | None], level: float = DEFAULT_LEVEL,
                resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> PairedTest:
    """Compare two programs scored on the same examples, in the same order (``None`` = 0)."""
    check_level(level, resamples)
    first, second = as_scores(before, "before"), as_scores(after, "after")
    if len(first) != len(second):
        raise ValueError(f"a paired test needs the same examples: {len(first)} scores before, {len(second)} after")
    if not len(first):
        raise ValueError("no scores: a paired test needs at least one example")
    differences = second - first
    wins, losses = int((differences > 0).sum()), int((differences < 0).sum())
    if is_binary(first, second):
        low, high = newcombe_paired_bounds(first, second, level)
        p_value, method = mcnemar_exact_p(wins, losses), "mcnemar-exact"
    else:
        low, high = percentile_bounds(resampled_means(differences, resamples, seed), level)
        p_value, method = bootstrap_p(differences, resamples, seed), "paired-bootstrap"
    return PairedTest(float(differences.mean()), low, high, p_value, len(first), wins, losses, method, level)
