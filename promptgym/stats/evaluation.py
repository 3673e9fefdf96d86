"""``Evaluation``: what ``evaluate()`` returns, a Keras dict that also knows how sure it is.

It *is* the plain ``{"reward": 0.8, "f1_score": 0.71}`` dict (indexing, ``json.dumps``,
``dict(...)`` all work as before); the per-example scores behind each mean ride
along as attributes, so the interval and a paired comparison need no extra run:

    >>> before = Evaluation({"reward": [0, 1, 0, 0, 1, 0, 0, 1]})
    >>> after = Evaluation({"reward": [1, 1, 1, 0, 1, 1, 1, 1]})
    >>> after["reward"]
    0.875
    >>> after.interval("reward").n
    8
    >>> after.compare(before).wins
    4
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from promptgym.stats.intervals import DEFAULT_LEVEL, Interval, as_scores, confidence_interval
from promptgym.stats.paired import PairedTest, paired_test


class Evaluation(dict):
    """Mean of each score over the examples (the dict), plus ``scores``, ``interval()``, ``compare()``.

    Args:
        scores: per-example values for each key (``None`` for a failed example counts 0).
        extra: keys to add to the dict as they are (no per-example scores, e.g. LM usage).
        level: the confidence level of ``interval()`` and ``compare()``.
        seed: the bootstrap's seed for graded scores (the same scores and seed give the same interval).
        failures: positions of the examples whose run failed (they score 0).
    """

    def __init__(self, scores: Mapping[str, Sequence[float | None]], extra: Mapping[str, Any] | None = None,
                 level: float = DEFAULT_LEVEL, seed: int = 0, failures: Sequence[int] = ()) -> None:
        self.failures = tuple(int(index) for index in failures)
        self.scores = {name: tuple(float(v) for v in as_scores(values, name)) for name, values in scores.items()}
        sizes = {len(values) for values in self.scores.values()}
        if len(sizes) > 1:
            raise ValueError(f"every key needs one score per example; got lengths { {k: len(v) for k, v in self.scores.items()} }")
        self.n = sizes.pop() if sizes else 0
        self.level, self.seed = level, seed
        self.cost: dict[str, Any] | None = None
        """What a call cost, beside the score: ``tokens_per_call``, ``usd_per_call`` (None when unpriced),
        ``cost_usd`` (all the examples, cached answers at their price); None when not measured."""
        means = {name: (sum(values) / self.n if self.n else None) for name, values in self.scores.items()}
        super().__init__({**means, **(extra or {})})

    def interval(self, name: str | None = None) -> Interval:
        """The confidence interval of ``name``'s mean (default: the first key, the reward)."""
        return confidence_interval(self._scores_of(name), level=self.level, seed=self.seed)

    def intervals(self) -> dict[str, Interval]:
        return {name: self.interval(name) for name in self.scores} if self.n else {}

    def compare(self, baseline: "Evaluation", name: str | None = None) -> PairedTest:
        """This result against ``baseline`` on the same examples: ``after.compare(before)``."""
        if not isinstance(baseline, Evaluation):
            raise TypeError("compare() needs the baseline's Evaluation (what evaluate() returned), "
                            f"not a {type(baseline).__name__}: its per-example scores make the test paired")
        key = name or self._default_name()
        return paired_test(baseline._scores_of(key), self._scores_of(key), level=self.level, seed=self.seed)

    def statistics(self) -> dict[str, Any]:
        """JSON-ready: ``{"n", "level", "intervals": {key: {...}}, "scores": {key: [...]}}``."""
        return {"n": self.n, "level": self.level, "seed": self.seed, "failures": list(self.failures),
                "intervals": {name: interval.as_dict() for name, interval in self.intervals().items()},
                "scores": {name: list(values) for name, values in self.scores.items()},
                **({"cost": dict(self.cost)} if self.cost is not None else {})}

    @classmethod
    def from_statistics(cls, means: Mapping[str, Any], statistics: Mapping[str, Any]) -> "Evaluation":
        """Rebuild from ``statistics()`` (e.g. a run folder's status) and the plain dict it came with."""
        scores = statistics.get("scores") or {}
        extra = {key: value for key, value in means.items() if key not in scores}
        evaluation = cls(scores, extra, level=statistics.get("level", DEFAULT_LEVEL), seed=statistics.get("seed", 0),
                         failures=statistics.get("failures", ()))
        evaluation.cost = dict(statistics["cost"]) if statistics.get("cost") else None
        return evaluation

    def describe(self, name: str | None = None) -> str:
        """``"0.800 [0.650, 0.925] (n=40)"``."""
        return str(self.interval(name)) if self.n else "n/a (no examples)"

    def _default_name(self) -> str:
        if not self.scores:
            raise ValueError("this Evaluation has no per-example scores")
        return next(iter(self.scores))

    def _scores_of(self, name: str | None) -> tuple[float, ...]:
        key = name or self._default_name()
        if key not in self.scores:
            raise KeyError(f"no per-example scores for {key!r}; have {sorted(self.scores)}")
        return self.scores[key]

    def __reduce__(self) -> Any:
        extra = {key: value for key, value in self.items() if key not in self.scores}
        return (type(self), (self.scores, extra, self.level, self.seed, self.failures))
