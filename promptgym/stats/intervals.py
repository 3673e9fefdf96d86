"""Confidence intervals for a mean score over examples: a seeded bootstrap.

    >>> interval = bootstrap_interval([1, 1, 0, 1, 0, 1, 1, 1, 0, 1], seed=0)
    >>> round(interval.mean, 2), interval.n
    (0.7, 10)
    >>> interval.low < 0.7 < interval.high
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` examples and its ``level`` confidence interval ``[low, high]``."""

    mean: float
    low: float
    high: float
    n: int
    level: float = DEFAULT_LEVEL

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n, "level": self.level}

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}] (n={self.n})"


def as_scores(values: Sequence[float | None], what: str = "scores") -> np.ndarray:
    """Per-example scores as floats; a missing score (a failed example) counts 0."""
    array = np.array([0.0 if value is None else float(value) for value in values], dtype=float)
    if np.isnan(array).any():
        raise ValueError(f"{what}: a score is NaN (example {int(np.flatnonzero(np.isnan(array))[0])})")
    return array


def resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of ``resamples`` bootstrap samples of ``values`` (rows drawn with replacement)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    return values[picks].mean(axis=1)


def percentile_bounds(means: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def check_level(level: float, resamples: int) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level}")
    if resamples < 100:
        raise ValueError(f"resamples must be >= 100, got {resamples}")


def bootstrap_interval(scores: Sequence[float | None], level: float = DEFAULT_LEVEL,
                       resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Percentile bootstrap interval of the mean of ``scores`` (one per example, ``None`` = 0).

    The same scores and seed always give the same interval. When every example
    scored the same, the interval has zero width: it says nothing about examples
    not seen (10/10 on validation is not a proof of 100%).
    """
    check_level(level, resamples)
    values = as_scores(scores)
    if not len(values):
        raise ValueError("no scores: a confidence interval needs at least one example")
    low, high = percentile_bounds(resampled_means(values, resamples, seed), level)
    return Interval(float(values.mean()), low, high, len(values), level)
