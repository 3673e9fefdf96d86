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
- ``acceptance="significant"`` also asks the winner to be better by more than
  noise: the paired test over every example both were scored on, after up to
  three more rounds of held-out examples (see :mod:`promptgym.optimizers.racing`).
"""

from __future__ import annotations

import warnings
from typing import Any

from promptgym.core.serialization import register_builtin
from promptgym.optimizers import racing
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.demo_pool import DemoPool, DemoSampler, FewShotArguments
from promptgym.optimizers.kit import Budget, OptimizerContext


class FewShotOptimizer(FewShotArguments, Optimizer):
    """Shared loop: grow the demo pool, propose, race on a validation minibatch, keep the better."""

    def __init__(self, nb_min_examples: int = 1, nb_max_examples: int = 3, min_reward: float = 0.5,
                 use_labels: bool = True, max_metric_calls: int | None = None, seed: int | None = None,
                 acceptance: str = "lead", sampling: str = "softmax", sampling_temperature: float = 0.3,
                 population_size: int = 10, name: str | None = None, description: str | None = None) -> None:
        if max_metric_calls is not None and max_metric_calls < 1:
            raise ValueError(f"max_metric_calls must be >= 1 or None, got {max_metric_calls}")
        if acceptance not in racing.ACCEPTANCE_RULES:
            raise ValueError(f"acceptance must be one of {', '.join(racing.ACCEPTANCE_RULES)}, got {acceptance!r}")
        if not isinstance(sampling_temperature, (int, float)) or sampling_temperature <= 0:
            raise ValueError(f"sampling_temperature must be > 0, got {sampling_temperature!r}")
        super().__init__(seed=seed, budget=Budget(max_metric_calls, unit="rollouts"), name=name, description=description)
        self.demos = DemoSampler(nb_min_examples, nb_max_examples, min_reward, use_labels, sampling,
                                 float(sampling_temperature))
        self.acceptance = acceptance
        self.population_size = population_size

    @property
    def sampling(self) -> str:
        """How demonstrations are drawn from the pool: "softmax" (over rewards), "best" or "random"."""
        return self.demos.sampling

    @property
    def sampling_temperature(self) -> float:
        return self.demos.sampling_temperature

    async def sample_best_predictions(self, trainable_variable: Any, rng: Any = None) -> list[dict[str, Any]]:
        """``nb_min_examples``..``nb_max_examples`` of a variable's scored ``predictions``, drawn by ``sampling``."""
        import numpy as np

        from promptgym.optimizers.demo_pool import pick

        data = trainable_variable.get_json() if hasattr(trainable_variable, "get_json") else dict(trainable_variable)
        predictions = list(data.get("predictions") or [])
        rng = rng or np.random.default_rng(self.seed)
        count = self.demos.count(rng)
        return pick(predictions, [float(p.get("reward") or 0.0) for p in predictions], count, rng, self.sampling,
                    self.sampling_temperature)

    @property
    def pool(self) -> DemoPool:
        warnings.warn("optimizer.pool is deprecated: use optimizer.demos.pool", DeprecationWarning, stacklevel=2)
        return self.demos.pool

    # -- the loop -------------------------------------------------------------------------

    async def on_train_begin(self, ctx: OptimizerContext) -> None:
        """Labelled training examples become demonstrations of the Generators that answer directly."""
        self.demos.seed(ctx.rollouts, self.prompts)

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        if self.budget.exhausted:
            return {"metric_calls": self.metric_calls}
        candidate = self.propose(ctx)
        if self.demos.needs_traces(self.prompts):
            runner = candidate or self.best
            shown = self.shown(runner)
            unseen = [i for i in batch if i not in shown]
            results = await self.score(ctx, runner, "train", self.affordable(ctx, "train", unseen, runner))
            self.demos.learn(ctx.rollouts, results)
            candidate = candidate or self.propose(ctx)
        if candidate is not None:
            await self.compete(ctx, candidate)
        return {"metric_calls": self.metric_calls, "demo_pool": self.demos.pool.size()}

    def propose(self, ctx: OptimizerContext) -> Candidate | None:
        raise NotImplementedError

    def shown(self, candidate: Candidate) -> set[int]:
        """Training examples that ``candidate`` shows as demonstrations (scoring it on them would leak)."""
        return self.demos.shown(candidate.variables, self.prompts)

    async def compete(self, ctx: OptimizerContext, candidate: Candidate) -> bool:
        """Race ``candidate`` against the incumbent (see :func:`racing.compete`); keep the better."""
        hidden = self.shown(candidate) | self.shown(self.best)
        return await racing.compete(self, ctx, candidate, hidden)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "nb_min_examples": self.demos.nb_min_examples,
                "nb_max_examples": self.demos.nb_max_examples, "min_reward": self.demos.pool.min_reward,
                "use_labels": self.demos.use_labels, "max_metric_calls": self.budget.limit,
                "acceptance": self.acceptance, "sampling": self.sampling, **self.naming_config(),
                "sampling_temperature": self.sampling_temperature, "population_size": self.population_size}

    def get_extra_state(self) -> dict[str, Any]:
        return {"pool": self.demos.pool.get_state(), "metric_calls": self.metric_calls}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.demos.pool.set_state(state.get("pool", {}))
        self.budget.spent = int(state.get("metric_calls", 0))


@register_builtin
class GreedyOptimizer(FewShotOptimizer):
    """Forward selection: try adding (or swapping in) the best untried demonstration; keep it if it helps."""

    def __init__(self, nb_min_examples: int = 1, nb_max_examples: int = 3, min_reward: float = 0.5,
                 use_labels: bool = True, max_metric_calls: int | None = None, seed: int | None = None,
                 acceptance: str = "lead", **options: Any) -> None:
        super().__init__(nb_min_examples=nb_min_examples, nb_max_examples=nb_max_examples, min_reward=min_reward,
                         use_labels=use_labels, max_metric_calls=max_metric_calls, seed=seed, acceptance=acceptance,
                         **options)
        self.tried: set[str] = set()

    def propose(self, ctx: OptimizerContext) -> Candidate | None:
        base, limit = self.best.variables, self.demos.nb_max_examples
        for state in self.prompts:
            name = state.variable
            current = list(base[name].get("examples", []))
            for demo in self.demos.pool.for_module(state.module_name):
                key = f"{name}:{demo.index}"
                if key in self.tried or demo.as_example() in current:
                    continue
                self.tried.add(key)
                examples = current + [demo.as_example()] if len(current) < limit else current[1:] + [demo.as_example()]
                variables = self.demos.with_examples(base, {name: examples})
                if self.find(variables) is None:
                    return self.add_candidate(variables, parent=self.best.id, origin="greedy")
        return None

    def get_extra_state(self) -> dict[str, Any]:
        return {**super().get_extra_state(), "tried": sorted(self.tried)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.tried = set(state.get("tried", []))


@register_builtin
class RandomFewShot(GreedyOptimizer):
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
        acceptance: ``"lead"`` (a candidate strictly ahead once close calls are
            settled wins) or ``"significant"`` (it must also be better by more
            than noise in a paired test; see :mod:`promptgym.optimizers.racing`).
        sampling / sampling_temperature: how demonstrations are drawn from the pool
            (``"softmax"`` over rewards: the best tier first; ``"best"``; ``"random"``).
        population_size, name, description: synalinks' arguments (accepted; the
            race keeps one incumbent).

    It is a GreedyOptimizer (as in synalinks) whose proposals are random draws.
    """

    def __init__(self, few_shot_learning: bool = False, nb_min_examples: int = 1, nb_max_examples: int = 3,
                 min_reward: float = 0.5, use_labels: bool = True, max_metric_calls: int | None = None,
                 seed: int | None = None, acceptance: str = "lead", **options: Any) -> None:
        super().__init__(nb_min_examples=nb_min_examples, nb_max_examples=nb_max_examples, min_reward=min_reward,
                         use_labels=use_labels, max_metric_calls=max_metric_calls, seed=seed, acceptance=acceptance,
                         **options)
        self.few_shot_learning = few_shot_learning

    def propose(self, ctx: OptimizerContext) -> Candidate | None:
        base = self.best.variables
        for _ in range(8):  # a few draws to avoid re-proposing a known candidate
            chosen = {state.variable: self.demos.draw(state.module_name, ctx.rng) for state in self.prompts}
            if not any(chosen.values()):
                return None
            variables = self.demos.with_examples(base, chosen)
            if self.find(variables) is None:
                return self.add_candidate(variables, parent=self.best.id, origin="random_few_shot")
        return None

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "few_shot_learning": self.few_shot_learning}
