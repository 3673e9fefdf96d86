"""Two versions of a program on the same held-out traffic: each one's score with its interval, and a paired test.

``promptgym runs compare SERVED RETRAINED --traces DIR`` runs this on the newest
traces people labelled (the part a retraining from the same store held out):

    served, retrained = Program.load("qa.json"), Program.load("runs/r1/best_program.json")
    report = await compare_on(served, retrained, x_test, y_test, reward="exactmatch")
    print(report.test)          # +0.120 [+0.050, +0.190], p=0.001 (14 better, 2 worse of 60; ...): better
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promptgym.stats import Evaluation, PairedTest

HELD_OUT_FILE = "held_out.json"
"""Where a retrained run's folder keeps its comparison against the served version (``runs compare``)."""


@dataclass
class HeldOutComparison:
    """``before`` and ``after`` evaluated on the same examples, and the paired test of after against before."""

    before: Evaluation
    after: Evaluation
    test: PairedTest

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.test.n, "before": _summary(self.before), "after": _summary(self.after),
                "difference": self.test.as_dict(), "verdict": self.test.verdict()}


async def compare_on(before: Any, after: Any, x: Any, y: Any, reward: Any = "exactmatch",
                     batch_size: int = 8) -> HeldOutComparison:
    """Evaluate both programs (compiled here with ``reward``) on ``x, y``; the paired comparison."""
    if len(x) == 0:
        raise ValueError("no held-out examples to compare on")
    scores = []
    for program in (before, after):
        program.compile(reward=reward)
        scores.append(await program.evaluate(x, y, batch_size=batch_size, verbose=0))
    return HeldOutComparison(scores[0], scores[1], scores[1].compare(scores[0]))


def _summary(evaluation: Evaluation) -> dict[str, Any]:
    interval = evaluation.interval()
    return {"reward": interval.mean, "low": interval.low, "high": interval.high, "failures": len(evaluation.failures)}
