"""Never worse than the start: a candidate replaces the incumbent only on validation evidence.

Every optimizer's search ends in one check, made by ``fit()`` after each
epoch: the optimizer's best candidate and the program it started from are
both scored on every validation example (memoised runs cost nothing), and
the best one stays unless its mean there is lower than the start's (a tie
keeps the optimizer's choice, which its own race settled on held-out
examples; KNNFewShot's contenders must be strictly ahead).
The comparison (both scores with their intervals, the paired test) goes into
the ``CandidateAccepted`` / ``CandidateRejected`` event and the History::

    comparison = await compare_on_validation(ctx, candidate, start)
    comparison.accepted, comparison.candidate_score, comparison.test.p_value
    comparison.brief()   # 'val 0.850 [0.712, 0.929] vs start 0.800 [0.652, 0.895] (n=40): +0.050 ..., p=0.50'

Without validation data nothing can be checked: ``fit()`` says so once
(:data:`NO_VALIDATION_ADVICE`) and keeps what the optimizer chose.

A candidate that gives one answer to every validation example, while the
labels hold several, can still win on accuracy (a tuned model that learned
the most common label); its comparison carries a ``note`` saying so.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from promptgym.core.events import CandidateAccepted, CandidateRejected
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.kit import OptimizerContext
from promptgym.rewards.base import to_json
from promptgym.stats import Interval, PairedTest, confidence_interval, paired_test
from promptgym.stats.token_rule import mean_tokens, token_rule

NO_VALIDATION_ADVICE = (
    "fit() has no validation data (validation_split=0 and no validation_data), so it cannot check that the "
    "trained program is better than the one it started from; pass validation_data=(x_val, y_val) or "
    "validation_split=0.2 (at least 20 examples give a usable check)")

_EPS = 1e-9
# below this many validation examples one answer to all of them is no sign of anything
_MIN_EXAMPLES_FOR_NOTE = 10


class OneAnswerWarning(UserWarning):
    """An accepted candidate gives one answer to every validation example while the labels differ."""


@dataclass(frozen=True)
class Comparison:
    """A candidate against an incumbent on the same validation examples, and whether it was ``accepted``."""

    candidate: int
    incumbent: int
    split: str
    candidate_score: Interval
    incumbent_score: Interval
    test: PairedTest
    accepted: bool
    stage: str | None = None
    incumbent_label: str = "start"
    note: str = ""
    candidate_tokens: float | None = None
    """Mean prompt + completion tokens per validation call (None: not measured)."""
    incumbent_tokens: float | None = None
    candidate_usd: float | None = None
    """Mean dollars per validation call, cached answers at their price (None: not measured or unpriced)."""
    incumbent_usd: float | None = None
    token_rule: str = ""
    """Why a candidate that costs more tokens per call was kept or dropped (:mod:`promptgym.stats.token_rule`)."""
    dropped_for_cost: bool = False
    """Ahead on validation, but costlier per call without a significant win: not accepted."""

    def as_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "incumbent": self.incumbent, "split": self.split,
                "stage": self.stage, "accepted": self.accepted,
                "candidate_score": self.candidate_score.as_dict(), "incumbent_score": self.incumbent_score.as_dict(),
                "test": self.test.as_dict(), **({"note": self.note} if self.note else {}),
                "tokens_per_call": {"candidate": self.candidate_tokens, self.incumbent_label: self.incumbent_tokens},
                "usd_per_call": {"candidate": self.candidate_usd, self.incumbent_label: self.incumbent_usd},
                **({"token_rule": self.token_rule, "dropped_for_cost": self.dropped_for_cost}
                   if self.token_rule else {})}

    def brief(self) -> str:
        brief = f"{self.split} {self.candidate_score} vs {self.incumbent_label} {self.incumbent_score}: {self.test.brief()}"
        if self.candidate_tokens is not None and self.incumbent_tokens is not None:
            brief += f"; tokens/call {self.candidate_tokens:.0f} vs {self.incumbent_tokens:.0f}"
        if self.candidate_usd is not None and self.incumbent_usd is not None:
            brief += f", ${self.candidate_usd:.6f} vs ${self.incumbent_usd:.6f} a call"
        if self.token_rule:
            brief += f"; {self.token_rule}"
        return f"{brief}; note: {self.note}" if self.note else brief


def one_answer_note(predictions: Sequence[Any], targets: Sequence[dict[str, Any]]) -> str:
    """A note when every prediction gives the same answer (on the labels' fields) and the labels differ; else "".

    >>> one_answer_note([{"answer": "yes"}] * 12, [{"answer": "yes"}] * 8 + [{"answer": "no"}] * 4)
    'it answers {"answer": "yes"} to all 12 validation examples, whose labels hold 2 different answers: it may have learned the most common label'
    >>> one_answer_note([{"answer": "yes"}] * 12, [{"answer": "yes"}] * 12)
    ''
    """
    fields = sorted({name for target in targets for name in target})
    answers = {json.dumps({name: (to_json(p) or {}).get(name) for name in fields}, ensure_ascii=False)
               for p in predictions}
    labels = {json.dumps({name: t.get(name) for name in fields}, ensure_ascii=False) for t in targets}
    if len(predictions) < _MIN_EXAMPLES_FOR_NOTE or len(answers) != 1 or len(labels) < 2:
        return ""
    return (f"it answers {answers.pop()} to all {len(predictions)} validation examples, whose labels hold "
            f"{len(labels)} different answers: it may have learned the most common label")


async def compare_on_validation(ctx: OptimizerContext, candidate: Candidate, incumbent: Candidate,
                                stage: str | None = None, incumbent_label: str = "start",
                                ties_win: bool = False) -> Comparison | None:
    """Score both on every validation example (memoised runs are free); None without validation data.

    ``accepted``: the candidate's mean is higher (or, with ``ties_win``, not lower). The runs are the
    trainer's, like its validation pass: no optimizer's budget pays for them.
    """
    rollouts = ctx.rollouts
    if rollouts.size("val") == 0:
        return None
    indices = list(range(rollouts.size("val")))
    theirs = await rollouts.run("val", indices, variables=incumbent.variables)
    incumbent.record(theirs)
    ours = await rollouts.run("val", indices, variables=candidate.variables)
    candidate.record(ours)
    before, after = [r.reward for r in theirs], [r.reward for r in ours]
    test = paired_test(before, after)
    accepted = test.difference > (-_EPS if ties_win else _EPS)
    note = one_answer_note([r.prediction for r in ours if not r.error],
                           [rollouts.target_json("val", i) for i in indices])
    tokens_after, tokens_before = mean_tokens([r.tokens for r in ours]), mean_tokens([r.tokens for r in theirs])
    rule = token_rule(test, tokens_after, tokens_before)
    return Comparison(candidate.id, incumbent.id, "val", confidence_interval(after), confidence_interval(before),
                      test, accepted and rule.keep, stage, incumbent_label, note, tokens_after, tokens_before,
                      _mean_usd(ours), _mean_usd(theirs), rule.why, accepted and not rule.keep)


def _mean_usd(results: Sequence[Any]) -> float | None:
    """Mean dollars per call; None when any call's price is unknown (a partial figure would mislead)."""
    values = [r.usd for r in results]
    return sum(values) / len(values) if values and all(v is not None for v in values) else None


async def announce(ctx: OptimizerContext, comparison: Comparison, candidate: Candidate, what: str = "") -> None:
    """Emit ``CandidateAccepted`` or ``CandidateRejected`` with the comparison as payload."""
    difference = comparison.test.difference
    if comparison.accepted:
        verb = "level with" if abs(difference) <= _EPS else "better than"
    else:
        verb = "no better than" if abs(difference) <= _EPS else "worse than" if difference < 0 else \
            "better than (but behind another contender)"
    reason = f"{what}{verb} the {comparison.incumbent_label} on validation: {comparison.brief()}"
    if comparison.dropped_for_cost:
        level = "level with" if abs(difference) <= _EPS else "ahead of"
        reason = (f"{what}dropped: {level} the {comparison.incumbent_label} on validation but costlier per call, "
                  f"without a significant win: {comparison.brief()}")
    event = CandidateAccepted if comparison.accepted else CandidateRejected
    if comparison.accepted and comparison.note:
        warnings.warn(f"{what}accepted on validation, but {comparison.note}", OneAnswerWarning, stacklevel=2)
    await ctx.emit(event(candidate=candidate.id, parent=candidate.parent, reason=reason,
                         comparison=comparison.as_dict()))


async def keep_if_better_than_start(optimizer: Optimizer, ctx: OptimizerContext, stage: str | None = None
                                    ) -> Comparison | None:
    """Compare ``optimizer``'s best with its starting candidate; fall back to the start when the best is behind.

    None when the best is the start, or without validation data.
    """
    start = optimizer.start
    best = optimizer.best
    if best.id == start.id:
        return None
    if best.id in optimizer.checked:  # an accepted best checked at an earlier epoch's end: nothing new to say
        return optimizer.checked[best.id]
    comparison = await compare_on_validation(ctx, best, start, stage, ties_win=True)
    if comparison is None:
        return None
    optimizer.last_check = comparison
    if comparison.accepted:
        optimizer.checked[best.id] = comparison
    else:
        optimizer.best_id = start.id
    await announce(ctx, comparison, best, what=f"{best.origin} candidate {best.id}: ")
    return comparison


async def race_on_validation(optimizer: Optimizer, ctx: OptimizerContext, contenders: Sequence[Candidate | None],
                             describe: Callable[[Candidate], str] = lambda c: f"{c.origin} candidate {c.id}: ",
                             stage: str | None = None,
                             annotate: Callable[[Comparison], Comparison] = lambda comparison: comparison
                             ) -> Candidate | None:
    """Score each contender and the incumbent on every validation example; the best strictly ahead wins.

    Each contender's comparison is announced (the winner's as accepted, the others' as rejected);
    returns the winner (None when none is ahead: the incumbent stays). ``annotate`` may return the
    comparison with more to say (FineTune adds what it trained).
    """
    incumbent = optimizer.best
    label = "start" if incumbent.id == optimizer.start.id else "incumbent"
    stage = stage or optimizer.stage_name
    compared = []
    for contender in contenders:
        if contender is not None and contender.id != incumbent.id:
            comparison = await compare_on_validation(ctx, contender, incumbent, stage, incumbent_label=label)
            if comparison is not None:
                compared.append((contender, annotate(comparison)))
    ahead = [(c, comparison) for c, comparison in compared if comparison.accepted]
    winner, displaced = await _cheapest_earned(ctx, ahead, stage)
    if winner is None and compared:
        optimizer.last_check = replace(max(compared, key=lambda item: item[1].candidate_score.mean)[1], accepted=False)
    for contender, comparison in compared:
        if contender is winner:
            optimizer.best_id = contender.id
            optimizer.checked[contender.id] = comparison
            optimizer.last_check = comparison
            await announce(ctx, comparison, contender, what=describe(contender))
        elif contender.id in displaced:  # ahead of the incumbent, dropped for a cheaper contender level with it
            await announce(ctx, displaced[contender.id], contender, what=describe(contender))
        else:
            await announce(ctx, replace(comparison, accepted=False), contender, what=describe(contender))
    return winner


async def _cheapest_earned(ctx: OptimizerContext, ahead: list[tuple[Candidate, Comparison]],
                           stage: str | None) -> tuple[Candidate | None, dict[int, Comparison]]:
    """The best-scoring contender ahead of the incumbent, unless a cheaper one ahead is level with it.

    The token rule holds between contenders too: one that costs more tokens per call than another that is
    also ahead must beat that one significantly, or the cheaper one wins (a tuned model with and without
    the demonstrations before it: the user would pay for the demonstrations on every call for noise).
    The contenders were all scored on every validation example, so these comparisons run nothing new.
    Returns the winner and, for each contender it displaced that way, its comparison with the cheaper one.
    """
    ranked = sorted(ahead, key=lambda item: -item[1].candidate_score.mean)
    displaced: dict[int, Comparison] = {}
    if not ranked:
        return None, displaced
    winner, winner_check = ranked[0]
    while True:
        cheaper = [(c, comparison) for c, comparison in ranked if c is not winner
                   and comparison.candidate_tokens is not None and winner_check.candidate_tokens is not None
                   and comparison.candidate_tokens < winner_check.candidate_tokens]
        for contender, check in cheaper:  # best-scoring first
            against = await compare_on_validation(ctx, winner, contender, stage, incumbent_label="cheaper contender")
            rule = token_rule(against.test, against.candidate_tokens, against.incumbent_tokens) if against else None
            if against is not None and rule is not None and rule.costlier and not rule.keep:
                displaced[winner.id] = replace(against, accepted=False, token_rule=rule.why,
                                               dropped_for_cost=True)
                winner, winner_check = contender, check
                break
        else:
            return winner, displaced


async def check_chain(stages: Sequence[Optimizer], ctx: OptimizerContext) -> Comparison | None:
    """A chain's end against the program its first stage started from, by the same check (``stage="chain"``).

    Each stage is checked against the stage before it, so a chain of small steps could grow its tokens per
    call past the rule's tolerance (:mod:`promptgym.stats.token_rule`) without any one step doing so. When
    the end fails against the start, the latest stage end that passes is kept instead, else the start (it
    becomes the last stage's best). None when the chain changed nothing, or only its first stage did (that
    stage's own check said it all), or without validation data.
    """
    origin, last = stages[0].start, stages[-1]
    end = last.best
    if end.variables == origin.variables or (len(stages) > 1 and end.variables == stages[0].best.variables):
        return None
    comparison = await compare_on_validation(ctx, end, origin, "chain", ties_win=True)
    if comparison is None:
        return None
    await announce(ctx, comparison, end, what="the chain's end: ")
    if comparison.accepted:
        return comparison
    kept = origin
    for stage in reversed(stages[:-1]):
        earlier = stage.best
        if earlier.variables == origin.variables:
            continue
        check = await compare_on_validation(ctx, earlier, origin, "chain", ties_win=True)
        if check is not None and check.accepted:
            await announce(ctx, check, earlier, what=f"the chain's end falls back to {stage.stage_name or 'a stage'}: ")
            kept = earlier
            break
    fallback = last.find(kept.variables) or last.add_candidate(kept.variables, parent=end.id, origin="chain")
    last.best_id = fallback.id
    last.last_check = comparison
    return comparison
