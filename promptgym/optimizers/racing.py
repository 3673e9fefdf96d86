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

An optimizer whose ``acceptance`` is ``"significant"`` asks more of a
winner: the paired test over every example both programs were scored on
(:func:`paired_evidence`, McNemar's exact test for 0/1 rewards) must say
"better" at 95%; if it does not yet, the two go on over up to
``CONFIRM_ROUNDS`` more rounds of held-out training examples, and the
candidate is accepted only if the test then says so. The default
(``"lead"``) accepts a candidate strictly ahead once close calls are settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from promptgym.core.events import CandidateProposed, CandidateScored
from promptgym.stats import PairedTest, paired_test
from promptgym.modules.generator import as_json
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.kit import OptimizerContext

RACE_CHUNK = 2
"""Examples per round of a race (each round runs both programs on them)."""

CLOSE_MARGIN = 1.0
"""A validation lead of at most this many examples (either way) is settled on held-out training examples."""

SETTLE_ROUNDS = 2
"""Rounds of ``minibatch_size`` held-out examples a close call may take: the second only after a dead heat."""

CONFIRM_ROUNDS = 3
"""Rounds of ``minibatch_size`` more held-out examples a winner may take to become significant."""

ACCEPTANCE_RULES = ("lead", "significant")

_EPS = 1e-9


def verdict(lead: float, margin: float | None = None) -> int:
    """+1 candidate ahead, -1 not; with a ``margin``, 0 when the lead is within it either way."""
    if margin is None:
        return 1 if lead > _EPS else -1
    return 1 if lead > margin + _EPS else -1 if lead < -margin - _EPS else 0


def race_decided(lead: float, left: int, margin: float | None = None) -> bool:
    """Whether ``left`` more examples (rewards in [0, 1]) can no longer change the verdict on ``lead``."""
    return verdict(lead - left, margin) == verdict(lead + left, margin)


async def race(optimizer: Optimizer, ctx: OptimizerContext, candidate: Candidate, incumbent: Candidate,
               split: str, indices: Sequence[int], head_start: float = 0.0,
               margin: float | None = None) -> tuple[float, int]:
    """Score both on ``indices`` until the verdict is known or unaffordable; the lead gained and examples raced.

    ``head_start`` is a lead carried over from an earlier race (it counts in
    deciding when to stop, not in the returned lead). Examples the incumbent
    already has scores on go first (they cost one run, not two). Runs are
    charged to ``optimizer``'s budget.
    """
    known = incumbent.scores.get(split, {})
    order = sorted(indices, key=lambda i: str(i) not in known)
    raced: list[int] = []
    lead = 0.0
    while len(raced) < len(order):
        chunk = optimizer.affordable(ctx, split, order[len(raced):len(raced) + RACE_CHUNK], candidate, incumbent)
        if not chunk:
            break
        await optimizer.score(ctx, candidate, split, chunk)
        await optimizer.score(ctx, incumbent, split, chunk)
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


async def settle_close_call(optimizer: Optimizer, ctx: OptimizerContext, candidate: Candidate,
                            incumbent: Candidate, lead: float, examples: int, where: str,
                            hidden: set[int]) -> Outcome:
    """A validation ``lead`` too close to call goes on over ``minibatch_size`` training examples not in ``hidden``.

    If that leaves the two level (a dead heat: typically both perfect on
    everything so far), one more round of ``minibatch_size`` held-out
    examples follows, since only more examples can tell them apart.
    Without validation data (the validation split is the training set) there
    is nothing held out, and the lead stands; so it does for a candidate that
    solved no validation example (level with an incumbent at zero, it is no
    better, whatever the held-out examples say).
    """
    split = ctx.rollouts.validation_split()
    if examples == 0 or split == "train" or verdict(lead, CLOSE_MARGIN) != 0 or not candidate.mean(split):
        return Outcome(lead, examples, where)
    size = ctx.rollouts.minibatch_size
    held_out = held_out_training_examples(ctx, SETTLE_ROUNDS * size, hidden)
    more, count = 0.0, 0
    for start in range(0, len(held_out), size):
        chunk = held_out[start:start + size]
        gained, raced = await race(optimizer, ctx, candidate, incumbent, "train", chunk, head_start=lead + more)
        more, count = more + gained, count + raced
        if raced < len(chunk) or abs(lead + more) > _EPS:
            break
    if count == 0:
        return Outcome(lead, examples, where)
    return Outcome(lead + more, examples + count,
                   f"{where} (lead {lead:+g}: too close to call) and {count} held-out train examples", held_out=count)


async def contest(optimizer: Optimizer, ctx: OptimizerContext, candidate: Candidate, incumbent: Candidate,
                  indices: Sequence[int], hidden: set[int]) -> Outcome:
    """Race on the validation ``indices``; a close call is settled on training examples not in ``hidden``.

    Without validation data (the validation split is the training set) the
    plain race decides.
    """
    split = ctx.rollouts.validation_split()
    margin = None if split == "train" else CLOSE_MARGIN
    lead, raced = await race(optimizer, ctx, candidate, incumbent, split, indices, margin=margin)
    where = f"{raced} {split} examples"
    return await settle_close_call(optimizer, ctx, candidate, incumbent, lead, raced, where, hidden)


async def compete(optimizer: Optimizer, ctx: OptimizerContext, candidate: Candidate, hidden: set[int],
                  wins_dead_heat: bool = False) -> bool:
    """Race ``candidate`` against ``optimizer``'s incumbent on one validation minibatch; keep the better.

    A validation minibatch is small: a race it leaves within one example
    either way (typically both perfect) is too close to call, and goes on
    over training examples in ``hidden``'s complement (those neither program
    shows as a demonstration), the validation lead carried over (see
    :func:`contest`). With ``wins_dead_heat`` the candidate also replaces
    the incumbent when that evidence leaves them exactly level.
    """
    split, incumbent = ctx.rollouts.validation_split(), optimizer.best
    indices = [i for i in ctx.rollouts.validation_minibatch() if split != "train" or i not in hidden]
    await ctx.emit(CandidateProposed(candidate=candidate.id, parent=candidate.parent, origin=candidate.origin))
    outcome = await contest(optimizer, ctx, candidate, incumbent, indices, hidden)
    await ctx.emit(CandidateScored(candidate=candidate.id, incumbent=incumbent.id, lead=outcome.lead,
                                   examples=outcome.examples, where=outcome.where))
    if outcome.won and getattr(optimizer, "acceptance", "lead") == "significant":
        test = await confirm(optimizer, ctx, candidate, incumbent, hidden)
        if test is None or test.verdict() != "better":
            await ctx.emit(CandidateScored(candidate=candidate.id, incumbent=incumbent.id, lead=outcome.lead,
                                           examples=test.n if test else outcome.examples,
                                           where=f"not significant: {test.brief() if test else 'no paired examples'}"))
            return False
        await optimizer.accept(ctx, candidate, reason=f"better on {test.n} paired examples: {test.brief()}")
        return True
    if outcome.won:
        await optimizer.accept(ctx, candidate, reason=f"ahead by {outcome.lead:g} on {outcome.where}")
        return True
    if wins_dead_heat and outcome.dead_heat:
        await optimizer.accept(ctx, candidate, reason=f"level on {outcome.where}: {candidate.origin} wins a dead heat")
        return True
    return False


def shown_training_examples(ctx: OptimizerContext, *programs: Candidate) -> set[int]:
    """Training examples whose inputs appear among the demonstrations of any of ``programs``."""
    shown_inputs = [example.get("inputs") for program in programs for value in program.variables.values()
                    if isinstance(value, dict) for example in value.get("examples") or []]
    if not shown_inputs:
        return set()
    return {index for index, x in enumerate(ctx.rollouts.inputs("train")) if as_json(x) in shown_inputs}


def held_out_training_examples(ctx: OptimizerContext, count: int, hidden: set[int]) -> list[int]:
    """The first ``count`` training examples of the held-out order that are not in ``hidden`` (shown ones)."""
    return [i for i in ctx.rollouts.held_out_order() if i not in hidden][:count]


def paired_evidence(candidate: Candidate, incumbent: Candidate) -> PairedTest | None:
    """The paired test of ``candidate`` against ``incumbent`` on every example both were scored on."""
    before, after = [], []
    for split, scores in candidate.scores.items():
        theirs = incumbent.scores.get(split, {})
        for index, score in scores.items():
            if index in theirs:
                before.append(theirs[index])
                after.append(score)
    return paired_test(before, after) if before else None


async def confirm(optimizer: Optimizer, ctx: OptimizerContext, candidate: Candidate, incumbent: Candidate,
                  hidden: set[int]) -> PairedTest | None:
    """Score both on more held-out training examples until the paired test says "better" (or rounds run out)."""
    test = paired_evidence(candidate, incumbent)
    size = ctx.rollouts.minibatch_size
    for _ in range(CONFIRM_ROUNDS):
        if test is not None and test.verdict() == "better":
            break
        seen = set(candidate.scores.get("train", {}))
        chunk = [i for i in held_out_training_examples(ctx, len(ctx.rollouts.held_out_order()), hidden)
                 if str(i) not in seen][:size]
        chunk = optimizer.affordable(ctx, "train", chunk, candidate, incumbent)
        if not chunk:
            break
        await optimizer.score(ctx, incumbent, "train", chunk)
        await optimizer.score(ctx, candidate, "train", chunk)
        test = paired_evidence(candidate, incumbent)
    return test
