"""Paired races between a candidate and the incumbent, stopped as soon as the verdict is known.

Both programs run on the same examples, a few at a time; rewards are in
[0, 1], so the candidate's final lead (in examples) lies within ``left`` of
its current lead. A plain race asks "is the candidate strictly ahead?"::

    race_decided(lead=3, left=2)   # True: 2 more examples cannot undo a lead of 3
    race_decided(lead=0, left=1)   # False: one more example may break the tie

A validation minibatch is small, so a race there also has a third verdict:
*too close to call* (a final lead within ``CLOSE_MARGIN`` examples either
way). :func:`contest` settles a close call on training examples that
neither program shows, carrying the validation lead over::

    race_decided(lead=-1, left=0, margin=CLOSE_MARGIN)   # True: close, settle it on held-out examples
    race_decided(lead=-1, left=1, margin=CLOSE_MARGIN)   # False: it may still end close
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

from promptgym.modules.generator import as_json
from promptgym.optimizers.base import Candidate
from promptgym.training.context import TrainingContext

RACE_CHUNK = 2
"""Examples per round of a race (each round runs both programs on them)."""

CLOSE_MARGIN = 1.0
"""A validation lead of at most this many examples (either way) is settled on held-out training examples."""

SETTLE_ROUNDS = 2
"""Rounds of ``minibatch_size`` held-out examples a close call may take: the second only after a dead heat."""

_EPS = 1e-9

Score = Callable[[Candidate, str, list[int]], Awaitable[Any]]
Affordable = Callable[[str, list[int], Candidate, Candidate], list[int]]


def verdict(lead: float, margin: float | None = None) -> int:
    """+1 candidate ahead, -1 not; with a ``margin``, 0 when the lead is within it either way."""
    if margin is None:
        return 1 if lead > _EPS else -1
    return 1 if lead > margin + _EPS else -1 if lead < -margin - _EPS else 0


def race_decided(lead: float, left: int, margin: float | None = None) -> bool:
    """Whether ``left`` more examples (rewards in [0, 1]) can no longer change the verdict on ``lead``."""
    return verdict(lead - left, margin) == verdict(lead + left, margin)


async def race(candidate: Candidate, incumbent: Candidate, split: str, indices: Sequence[int],
               score: Score, affordable: Affordable, head_start: float = 0.0,
               margin: float | None = None) -> tuple[float, int]:
    """Score both on ``indices`` until the verdict is known or unaffordable; the lead gained and examples raced.

    ``head_start`` is a lead carried over from an earlier race (it counts in
    deciding when to stop, not in the returned lead). Examples the incumbent
    already has scores on go first (they cost one run, not two).
    """
    known = incumbent.scores.get(split, {})
    order = sorted(indices, key=lambda i: str(i) not in known)
    raced: list[int] = []
    lead = 0.0
    while len(raced) < len(order):
        chunk = affordable(split, order[len(raced):len(raced) + RACE_CHUNK], candidate, incumbent)
        if not chunk:
            break
        await score(candidate, split, chunk)
        await score(incumbent, split, chunk)
        raced += chunk
        lead = ((candidate.mean(split, raced) or 0.0) - (incumbent.mean(split, raced) or 0.0)) * len(raced)
        if race_decided(head_start + lead, len(order) - len(raced), margin):
            break
    return lead, len(raced)


@dataclass
class Outcome:
    """How a contest ended: the candidate's lead (in examples), where it was measured, and whether it won."""

    lead: float
    examples: int
    where: str
    held_out: int = 0
    """How many of ``examples`` were held-out training examples (a settled close call)."""

    @property
    def won(self) -> bool:
        return self.examples > 0 and verdict(self.lead) > 0

    @property
    def dead_heat(self) -> bool:
        """A close call that held-out examples left exactly level: the evidence cannot tell the two apart."""
        return self.held_out > 0 and abs(self.lead) <= _EPS


async def settle_close_call(ctx: TrainingContext, candidate: Candidate, incumbent: Candidate, lead: float,
                            examples: int, where: str, hidden: set[int], score: Score,
                            affordable: Affordable) -> Outcome:
    """A validation ``lead`` too close to call goes on over ``minibatch_size`` training examples not in ``hidden``.

    If that leaves the two level (a dead heat: typically both perfect on
    everything so far), one more round of ``minibatch_size`` held-out
    examples follows, since only more examples can tell them apart.
    Without validation data (the validation split is the training set) there
    is nothing held out, and the lead stands; so it does for a candidate that
    solved no validation example (level with an incumbent at zero, it is no
    better, whatever the held-out examples say).
    """
    split = ctx.validation_split()
    if examples == 0 or split == "train" or verdict(lead, CLOSE_MARGIN) != 0 or not candidate.mean(split):
        return Outcome(lead, examples, where)
    size = ctx.minibatch_size
    held_out = held_out_training_examples(ctx, SETTLE_ROUNDS * size, hidden)
    more, count = 0.0, 0
    for start in range(0, len(held_out), size):
        chunk = held_out[start:start + size]
        gained, raced = await race(candidate, incumbent, "train", chunk, score, affordable, head_start=lead + more)
        more, count = more + gained, count + raced
        if raced < len(chunk) or abs(lead + more) > _EPS:
            break
    if count == 0:
        return Outcome(lead, examples, where)
    return Outcome(lead + more, examples + count,
                   f"{where} (lead {lead:+g}: too close to call) and {count} held-out train examples", held_out=count)


async def contest(ctx: TrainingContext, candidate: Candidate, incumbent: Candidate, indices: Sequence[int],
                  hidden: set[int], score: Score, affordable: Affordable) -> Outcome:
    """Race on the validation ``indices``; a close call is settled on training examples not in ``hidden``.

    Without validation data (the validation split is the training set) the
    plain race decides.
    """
    split = ctx.validation_split()
    margin = None if split == "train" else CLOSE_MARGIN
    lead, raced = await race(candidate, incumbent, split, indices, score, affordable, margin=margin)
    where = f"{raced} {split} examples"
    return await settle_close_call(ctx, candidate, incumbent, lead, raced, where, hidden, score, affordable)


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
    """The first ``count`` training examples of ``ctx.held_out_order()`` that are not in ``hidden`` (shown ones)."""
    return [i for i in ctx.held_out_order() if i not in hidden][:count]
