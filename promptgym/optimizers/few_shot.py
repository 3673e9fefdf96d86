"""Few-shot optimizers: RandomFewShot and GreedyOptimizer.

Both learn which training examples to show each Generator, and spend as few
program runs as they can doing it:

- A Generator that reads the program's input and writes its output gets the
  labelled training examples as demonstrations before any call (with
  ``use_labels=True``): for it, a successful trace would be the label itself.
- Other Generators (a ChainOfThought, a step inside a pipeline) learn from
  traces: each step runs the newest candidate (or, before there is one, the
  incumbent) on the training batch, and the steps of well-scored runs join
  the pool, along with labels for the steps that produce the answer.
- A candidate races the incumbent on a validation minibatch, a few examples
  at a time, examples the incumbent already has scores on first; the race
  stops as soon as the rest of the minibatch could not change the outcome.
  A race that ends within one example either way is too close to call on
  a minibatch: it goes on over training examples neither program shows,
  the validation lead carried over. The candidate replaces the incumbent
  only if it ends strictly ahead.
- ``max_metric_calls`` caps the program runs (training and validation) the
  optimizer makes; it stops proposing when they are spent.
"""

from __future__ import annotations

import math
from typing import Any

from promptgym.core.events import CandidateProposed, CandidateScored
from promptgym.core.serialization import register_builtin
from promptgym.optimizers import racing
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.demo_pool import DemoPool, seed_labelled_demos
from promptgym.rewards.base import to_json
from promptgym.training.context import ExampleResult, TrainingContext


def example_variables(variables: dict[str, Any]) -> list[str]:
    """Names of the variables that hold few-shot examples (Generator states)."""
    return [name for name, value in variables.items() if isinstance(value, dict) and "examples" in value]


def module_of(variable_name: str) -> str:
    return variable_name.rsplit("/", 1)[0]


class FewShotOptimizer(Optimizer):
    """Shared loop: grow the demo pool, propose, race on a validation minibatch, keep the better."""

    def __init__(self, nb_min_examples: int = 1, nb_max_examples: int = 3, min_reward: float = 0.5,
                 use_labels: bool = True, max_metric_calls: int | None = None, seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.use_labels = use_labels
        if not 0 <= nb_min_examples <= nb_max_examples:
            raise ValueError(f"need 0 <= nb_min_examples <= nb_max_examples, got {nb_min_examples} and {nb_max_examples}")
        if max_metric_calls is not None and max_metric_calls < 1:
            raise ValueError(f"max_metric_calls must be >= 1 or None, got {max_metric_calls}")
        self.nb_min_examples = nb_min_examples
        self.nb_max_examples = nb_max_examples
        self.max_metric_calls = max_metric_calls
        self.metric_calls = 0
        self.pool = DemoPool(min_reward=min_reward)
        self.labelled_modules: set[str] = set()

    # -- budget ---------------------------------------------------------------------------

    @property
    def remaining(self) -> float:
        return math.inf if self.max_metric_calls is None else self.max_metric_calls - self.metric_calls

    def affordable(self, ctx: TrainingContext, split: str, indices: list[int], *programs: Candidate) -> list[int]:
        """The longest prefix of ``indices`` on which every one of ``programs`` can be scored within budget."""
        return racing.affordable_prefix(ctx, split, indices, programs, lambda runs: runs <= self.remaining)

    async def score(self, ctx: TrainingContext, candidate: Candidate, split: str, indices: list[int]) -> list[ExampleResult]:
        self.metric_calls += len(ctx.pending(split, indices, candidate.variables))
        return await super().score(ctx, candidate, split, indices)

    # -- the loop -------------------------------------------------------------------------

    async def on_train_begin(self, ctx: TrainingContext) -> None:
        """Labelled training examples become demonstrations of the Generators that answer directly."""
        trained = {module_of(name) for name in example_variables(self.best.variables)}
        self.labelled_modules = seed_labelled_demos(self.pool, ctx, trained) if self.use_labels else set()

    def needs_traces(self) -> bool:
        return any(module_of(name) not in self.labelled_modules for name in example_variables(self.best.variables))

    async def train_step(self, ctx: TrainingContext, batch: list[int]) -> dict[str, float]:
        if self.remaining <= 0:
            return {"metric_calls": self.metric_calls}
        candidate = self.propose(ctx)
        if self.needs_traces():
            runner = candidate or self.best
            shown = self.shown(runner)
            unseen = [i for i in batch if i not in shown]
            results = await self.score(ctx, runner, "train", self.affordable(ctx, "train", unseen, runner))
            self.pool.add(results)
            if self.use_labels:
                self.pool.add_labels(results, {r.index: to_json(ctx.splits["train"][1][r.index]) for r in results})
            candidate = candidate or self.propose(ctx)
        if candidate is not None:
            await self.compete(ctx, candidate)
        return {"metric_calls": self.metric_calls, "demo_pool": self.pool.size()}

    def propose(self, ctx: TrainingContext) -> Candidate | None:
        raise NotImplementedError

    def shown(self, candidate: Candidate) -> set[int]:
        """Training examples that ``candidate`` shows as demonstrations (scoring it on them would leak)."""
        return {index for name in example_variables(candidate.variables)
                for index in self.pool.indices_shown(module_of(name), candidate.variables[name]["examples"])}

    async def compete(self, ctx: TrainingContext, candidate: Candidate) -> bool:
        """Race ``candidate`` against the incumbent on one validation minibatch; keep the better.

        A validation minibatch is small: a race it leaves within one example
        either way (typically both perfect) is too close to call, and goes on
        over training examples that neither program shows as a demonstration,
        the validation lead carried over (see :func:`racing.contest`).
        """
        split, incumbent = ctx.validation_split(), self.best
        hidden = self.shown(candidate) | self.shown(incumbent)
        indices = [i for i in ctx.validation_minibatch() if split != "train" or i not in hidden]
        await ctx.emit(CandidateProposed(candidate=candidate.id, parent=candidate.parent, origin=candidate.origin))

        async def score(program: Candidate, part: str, chunk: list[int]) -> None:
            await self.score(ctx, program, part, chunk)

        def affordable(part: str, chunk: list[int], *programs: Candidate) -> list[int]:
            return self.affordable(ctx, part, chunk, *programs)

        outcome = await racing.contest(ctx, candidate, incumbent, indices, hidden, score, affordable)
        await ctx.emit(CandidateScored(candidate=candidate.id, incumbent=incumbent.id, lead=outcome.lead,
                                       examples=outcome.examples, where=outcome.where))
        if outcome.won:
            await self.accept(ctx, candidate, reason=f"ahead by {outcome.lead:g} on {outcome.where}")
            return True
        if self.wins_dead_heat(candidate, outcome):
            await self.accept(ctx, candidate, reason=f"level on {outcome.where}: {candidate.origin} wins a dead heat")
            return True
        return False

    def wins_dead_heat(self, candidate: Candidate, outcome: racing.Outcome) -> bool:
        """Whether ``candidate`` replaces the incumbent when the evidence leaves them level (never, here)."""
        return False

    def with_examples(self, base: dict[str, Any], chosen: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        variables = {name: dict(value) for name, value in base.items()}
        for name, examples in chosen.items():
            variables[name]["examples"] = examples
        return variables

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "nb_min_examples": self.nb_min_examples,
                "nb_max_examples": self.nb_max_examples, "min_reward": self.pool.min_reward,
                "use_labels": self.use_labels, "max_metric_calls": self.max_metric_calls}

    def get_extra_state(self) -> dict[str, Any]:
        return {"pool": self.pool.get_state(), "metric_calls": self.metric_calls}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.pool.set_state(state.get("pool", {}))
        self.metric_calls = int(state.get("metric_calls", 0))


@register_builtin
class RandomFewShot(FewShotOptimizer):
    """Each step, a random choice of ``nb_min_examples``..``nb_max_examples`` demonstrations per Generator.

    Args:
        few_shot_learning: accepted for compatibility; RandomFewShot always
            learns examples (it is what it does).
        nb_min_examples / nb_max_examples: how many demonstrations per prompt.
        min_reward: a training run must earn at least this to become a demonstration.
        use_labels: labelled training examples may serve as demonstrations:
            all of them, before any call, for a Generator that reads the
            program's input and writes its output; for other steps, the
            label of a run that scored below ``min_reward`` (traced successes
            are preferred).
        max_metric_calls: cap on the program runs (training and validation)
            the optimizer makes; None: no cap. ``fit()``'s end-of-epoch
            validation pass is reporting and not counted.
        seed: fixes the sampling (the trainer's seed is used when None).
    """

    def __init__(self, few_shot_learning: bool = False, nb_min_examples: int = 1, nb_max_examples: int = 3,
                 min_reward: float = 0.5, use_labels: bool = True, max_metric_calls: int | None = None,
                 seed: int | None = None) -> None:
        super().__init__(nb_min_examples=nb_min_examples, nb_max_examples=nb_max_examples, min_reward=min_reward,
                         use_labels=use_labels, max_metric_calls=max_metric_calls, seed=seed)
        self.few_shot_learning = few_shot_learning

    def propose(self, ctx: TrainingContext) -> Candidate | None:
        base = self.best.variables
        for _ in range(8):  # a few draws to avoid re-proposing a known candidate
            chosen = {}
            for name in example_variables(base):
                count = int(ctx.rng.integers(self.nb_min_examples, self.nb_max_examples + 1))
                chosen[name] = [demo.as_example() for demo in self.pool.sample(module_of(name), count, ctx.rng)]
            if not any(chosen.values()):
                return None
            variables = self.with_examples(base, chosen)
            if self.find(variables) is None:
                return self.add_candidate(variables, parent=self.best.id, origin="random_few_shot")
        return None

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "few_shot_learning": self.few_shot_learning}


@register_builtin
class GreedyOptimizer(FewShotOptimizer):
    """Forward selection: try adding (or swapping in) the best untried demonstration; keep it if it helps."""

    def __init__(self, nb_min_examples: int = 1, nb_max_examples: int = 3, min_reward: float = 0.5,
                 use_labels: bool = True, max_metric_calls: int | None = None, seed: int | None = None) -> None:
        super().__init__(nb_min_examples=nb_min_examples, nb_max_examples=nb_max_examples, min_reward=min_reward,
                         use_labels=use_labels, max_metric_calls=max_metric_calls, seed=seed)
        self.tried: set[str] = set()

    def propose(self, ctx: TrainingContext) -> Candidate | None:
        base = self.best.variables
        for name in example_variables(base):
            current = list(base[name].get("examples", []))
            for demo in self.pool.for_module(module_of(name)):
                key = f"{name}:{demo.index}"
                if key in self.tried or demo.as_example() in current:
                    continue
                self.tried.add(key)
                examples = current + [demo.as_example()] if len(current) < self.nb_max_examples else current[1:] + [demo.as_example()]
                variables = self.with_examples(base, {name: examples})
                if self.find(variables) is None:
                    return self.add_candidate(variables, parent=self.best.id, origin="greedy")
        return None

    def get_extra_state(self) -> dict[str, Any]:
        return {**super().get_extra_state(), "tried": sorted(self.tried)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.tried = set(state.get("tried", []))
