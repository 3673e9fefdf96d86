"""Paired races between a candidate and the incumbent, stopped as soon as the winner is known.

Both programs run on the same examples, a few at a time; rewards are in
[0, 1], so once the lead is larger than the examples left (or cannot become
positive), the rest would not change who is strictly ahead::

    race_decided(lead=3, left=2)   # True: 2 more examples cannot undo a lead of 3
    race_decided(lead=0, left=1)   # False: one more example may break the tie
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from promptgym.modules.generator import as_json
from promptgym.optimizers.base import Candidate
from promptgym.training.context import TrainingContext

RACE_CHUNK = 2
"""Examples per round of a race (each round runs both programs on them)."""

Score = Callable[[Candidate, str, list[int]], Awaitable[Any]]
Affordable = Callable[[str, list[int], Candidate, Candidate], list[int]]


def race_decided(lead: float, left: int) -> bool:
    """Whether ``left`` more examples (rewards in [0, 1]) can no longer change who is strictly ahead."""
    return lead > left + 1e-9 or lead + left <= 1e-9


async def race(candidate: Candidate, incumbent: Candidate, split: str, indices: Sequence[int],
               score: Score, affordable: Affordable) -> tuple[float, float, int]:
    """Score both on ``indices`` until decided or unaffordable; their means over the examples raced, and how many.

    Examples the incumbent already has scores on go first (they cost one run, not two).
    """
    known = incumbent.scores.get(split, {})
    order = sorted(indices, key=lambda i: str(i) not in known)
    raced: list[int] = []
    while len(raced) < len(order):
        chunk = affordable(split, order[len(raced):len(raced) + RACE_CHUNK], candidate, incumbent)
        if not chunk:
            break
        await score(candidate, split, chunk)
        await score(incumbent, split, chunk)
        raced += chunk
        lead = ((candidate.mean(split, raced) or 0.0) - (incumbent.mean(split, raced) or 0.0)) * len(raced)
        if race_decided(lead, len(order) - len(raced)):
            break
    if not raced:
        return 0.0, 0.0, 0
    return candidate.mean(split, raced) or 0.0, incumbent.mean(split, raced) or 0.0, len(raced)


def affordable_prefix(ctx: TrainingContext, split: str, indices: Sequence[int], programs: Sequence[Candidate],
                      fits: Callable[[int], bool]) -> list[int]:
    """The longest prefix of ``indices`` whose new runs of every one of ``programs`` still ``fits(total_runs)``.

    Memoised scores cost nothing, so they never count against a budget.
    """
    runs, kept = 0, []
    for index in indices:
        runs += sum(len(ctx.pending(split, [index], program.variables)) for program in programs)
        if not fits(runs):
            break
        kept.append(index)
    return kept


def shown_training_examples(ctx: TrainingContext, *programs: Candidate) -> set[int]:
    """Training examples whose inputs appear among the demonstrations of any of ``programs``."""
    shown_inputs = [example.get("inputs") for program in programs for value in program.variables.values()
                    if isinstance(value, dict) for example in value.get("examples") or []]
    if not shown_inputs:
        return set()
    return {index for index, x in enumerate(ctx.splits["train"][0]) if as_json(x) in shown_inputs}


def held_out_training_examples(ctx: TrainingContext, count: int, hidden: set[int]) -> list[int]:
    """``count`` training examples, in a seeded order, leaving out ``hidden`` (the ones a program shows)."""
    return [int(i) for i in ctx.rng.permutation(ctx.size("train")) if int(i) not in hidden][:count]
