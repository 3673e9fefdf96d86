"""Discrete score scales a model picks from (judges, self-critique), and their normalisation to 0..1.

A small model grades more consistently on a short named scale than with a
free float: ``score: Rating`` constrains the answer to 1..5, and
``normalize_score(4, Rating) == 0.75``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class Score(float, Enum):
    """0.0 to 1.0 in steps of 0.1."""

    VERY_BAD = 0.0
    POOR = 0.1
    BELOW_AVERAGE = 0.2
    LOW_AVERAGE = 0.3
    MEDIUM_LOW = 0.4
    MEDIUM = 0.5
    MEDIUM_HIGH = 0.6
    ABOVE_AVERAGE = 0.7
    HIGH_AVERAGE = 0.8
    GOOD = 0.9
    VERY_GOOD = 1.0


class FineScore(float, Enum):
    """0.0 to 1.0 in steps of 0.05 (every ``Score`` level keeps its name)."""

    VERY_BAD = 0.0
    BAD = 0.05
    POOR = 0.1
    VERY_LOW = 0.15
    BELOW_AVERAGE = 0.2
    LOW = 0.25
    LOW_AVERAGE = 0.3
    SLIGHTLY_LOW = 0.35
    MEDIUM_LOW = 0.4
    SLIGHTLY_BELOW_MEDIUM = 0.45
    MEDIUM = 0.5
    SLIGHTLY_ABOVE_MEDIUM = 0.55
    MEDIUM_HIGH = 0.6
    SLIGHTLY_HIGH = 0.65
    ABOVE_AVERAGE = 0.7
    HIGH = 0.75
    HIGH_AVERAGE = 0.8
    VERY_HIGH = 0.85
    GOOD = 0.9
    EXCELLENT = 0.95
    VERY_GOOD = 1.0


_NUMBERS = ["ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE", "TEN", "ELEVEN", "TWELVE",
            "THIRTEEN", "FOURTEEN", "FIFTEEN", "SIXTEEN", "SEVENTEEN", "EIGHTEEN", "NINETEEN", "TWENTY"]

Rating = Enum("Rating", {name: i + 1 for i, name in enumerate(_NUMBERS[:5])}, type=int)  # type: ignore[misc]
Rating.__doc__ = "1 to 5 (a Likert scale)."
Rating10 = Enum("Rating10", {name: i + 1 for i, name in enumerate(_NUMBERS[:10])}, type=int)  # type: ignore[misc]
Rating10.__doc__ = "1 to 10."
Rating20 = Enum("Rating20", {name: i + 1 for i, name in enumerate(_NUMBERS[:20])}, type=int)  # type: ignore[misc]
Rating20.__doc__ = "1 to 20."
for _scale in (Rating, Rating10, Rating20):
    _scale.__module__ = __name__

SCORE_TYPES = {cls.__name__: cls for cls in (Score, FineScore, Rating, Rating10, Rating20)}


def get_score_type(identifier: Any) -> type[Enum]:
    """A scale from its class or name (``"Rating"``); any Enum of numbers is accepted."""
    if isinstance(identifier, str):
        if identifier not in SCORE_TYPES:
            raise ValueError(f"unknown score type {identifier!r}; known: {', '.join(SCORE_TYPES)}")
        return SCORE_TYPES[identifier]
    if isinstance(identifier, type) and issubclass(identifier, Enum) and \
            all(isinstance(member.value, (int, float)) and not isinstance(member.value, bool) for member in identifier):
        return identifier
    raise ValueError(f"a score type is an Enum whose members are numbers (Score, FineScore, Rating, Rating10, "
                     f"Rating20), got {identifier!r}")


def score_type_bounds(score_type: Any) -> tuple[float, float]:
    values = [float(member.value) for member in get_score_type(score_type)]
    return min(values), max(values)


def normalize_score(value: Any, score_type: Any) -> float:
    """``value`` on the scale's 0..1 line (lowest level 0, highest 1), clamped."""
    low, high = score_type_bounds(score_type)
    number = float(value.value if isinstance(value, Enum) else value)
    if high == low:
        return 1.0
    return min(1.0, max(0.0, (number - low) / (high - low)))


def describe_scale(score_type: Any) -> str:
    """``an integer between 1 and 5 (1 very bad, 5 very good)`` (for instructions)."""
    scale = get_score_type(score_type)
    low, high = score_type_bounds(scale)
    integer = all(isinstance(member.value, int) for member in scale)
    if integer:
        return f"an integer between {int(low)} and {int(high)} ({int(low)} very bad, {int(high)} very good)"
    return f"a float between {low:.1f} and {high:.1f} ({low:.1f} very bad, {high:.1f} very good)"
