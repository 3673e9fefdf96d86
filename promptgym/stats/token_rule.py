"""A candidate that costs more tokens per call must win by more than noise (issue 42; why: docs/cost.md).

The rule: when a candidate's mean tokens per validation call grow more than
:data:`TOKEN_GROWTH` (10%) over the program it is checked against, it is kept
only if its paired test says it is better at :data:`ALPHA` (ahead, p < 0.05). Growth of 10% or less, or no token
count, leaves the usual check (not worse on validation) alone::

    rule = token_rule(test, candidate_tokens=900.0, start_tokens=300.0)
    rule.keep, rule.why        # False, 'tokens/call 300 -> 900 (+200%, over +10%): ... not significant ...'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from promptgym.stats.paired import PairedTest

TOKEN_GROWTH = 0.10
"""Growth of tokens per call past which a candidate must win significantly (a reworded instruction stays under)."""
ALPHA = 0.05
"""The paired test's level a costlier candidate must reach."""

SMALLEST_SHOWING = 6
"""Fewest validation examples on which a sweep of wins reaches p < 0.05 (McNemar's exact test: 2 * 0.5**6)."""

_settings: dict[str, float | None] = {"growth": TOKEN_GROWTH, "alpha": ALPHA}


def set_token_rule(growth: float | None = TOKEN_GROWTH, alpha: float = ALPHA) -> None:
    """Change the rule for every later check: ``growth=None`` turns it off (a score is all that counts).

    >>> set_token_rule(0.25)      # tolerate 25% more tokens per call before asking for significance
    >>> set_token_rule()          # back to the defaults
    """
    if growth is not None and (isinstance(growth, bool) or not isinstance(growth, (int, float)) or growth < 0):
        raise ValueError(f"growth must be a fraction >= 0 (0.1 = 10% more tokens per call) or None, got {growth!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a level between 0 and 1 (0.05), got {alpha!r}")
    _settings.update(growth=growth, alpha=float(alpha))


@dataclass(frozen=True)
class TokenRule:
    """The rule's verdict: ``costlier`` (tokens/call grew past :data:`TOKEN_GROWTH`), ``keep``, and ``why``."""

    costlier: bool
    keep: bool
    why: str


def mean_tokens(tokens: Sequence[int | None]) -> float | None:
    """Mean tokens per call of the calls that were measured; None when none was.

    >>> mean_tokens([100, 120, None]), mean_tokens([None])
    (110.0, None)
    """
    measured = [value for value in tokens if value is not None]
    return sum(measured) / len(measured) if measured else None


def token_rule(test: PairedTest, candidate_tokens: float | None, start_tokens: float | None,
               growth: float | None = None, alpha: float | None = None) -> TokenRule:
    """Whether a candidate ``test.difference`` ahead may be kept given what it costs per call
    (``growth``/``alpha`` default to :func:`set_token_rule`'s).

    >>> from promptgym.stats import paired_test
    >>> tie = paired_test([1, 0, 1, 0], [1, 0, 1, 0])
    >>> token_rule(tie, 330.0, 300.0).keep, token_rule(tie, 400.0, 300.0).keep
    (True, False)
    """
    growth = _settings["growth"] if growth is None else growth
    alpha = float(_settings["alpha"] if alpha is None else alpha)
    if growth is None or candidate_tokens is None or start_tokens is None or start_tokens <= 0:
        return TokenRule(False, True, "")
    change = candidate_tokens / start_tokens - 1
    if change <= growth + 1e-9:  # exactly +10% is within the tolerance, float rounding aside
        return TokenRule(False, True, "")
    won = test.difference > 0 and test.p_value < alpha
    head = (f"tokens/call {start_tokens:.0f} -> {candidate_tokens:.0f} ({change:+.0%}, over {growth:+.0%}): "
            f"a costlier candidate must win at p < {alpha:g}")
    verdict = f"it does (p={test.p_value:.2g})" if won else f"not significant (p={test.p_value:.2g}): dropped"
    if not won and test.n < SMALLEST_SHOWING:
        verdict += (f" ({test.n} validation examples can't show it even if all were won: give at least "
                    f"{SMALLEST_SHOWING}, or set_token_rule(None) to weigh the score alone)")
    return TokenRule(True, won, f"{head}; {verdict}")
