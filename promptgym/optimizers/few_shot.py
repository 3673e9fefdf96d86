"""Few-shot optimizers: RandomFewShot and GreedyOptimizer.

Both learn which training examples to show each Generator. Every training
batch runs the current best program; the steps of examples that earned a
reward go to a pool; a new candidate (a different choice of demonstrations)
is scored on a validation minibatch against the incumbent, on the same
examples, and replaces it only if it does strictly better.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.core.serialization import register_builtin
from promptgym.optimizers.base import Candidate, Optimizer, paired_means
from promptgym.optimizers.demo_pool import DemoPool
from promptgym.rewards.base import to_json
from promptgym.training.context import TrainingContext


def example_variables(variables: dict[str, Any]) -> list[str]:
    """Names of the variables that hold few-shot examples (Generator states)."""
    return [name for name, value in variables.items() if isinstance(value, dict) and "examples" in value]


def module_of(variable_name: str) -> str:
    return variable_name.rsplit("/", 1)[0]


class FewShotOptimizer(Optimizer):
    """Shared loop: grow the demo pool, propose, compare on a minibatch, keep the better."""

    def __init__(self, nb_min_examples: int = 1, nb_max_examples: int = 3, min_reward: float = 0.5,
                 use_labels: bool = True, seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.use_labels = use_labels
        if not 0 <= nb_min_examples <= nb_max_examples:
            raise ValueError(f"need 0 <= nb_min_examples <= nb_max_examples, got {nb_min_examples} and {nb_max_examples}")
        self.nb_min_examples = nb_min_examples
        self.nb_max_examples = nb_max_examples
        self.pool = DemoPool(min_reward=min_reward)

    async def train_step(self, ctx: TrainingContext, batch: list[int]) -> dict[str, float]:
        results = await self.score(ctx, self.best, "train", batch)
        new = self.pool.add(results)
        if self.use_labels:
            new += self.pool.add_labels(results, {i: to_json(ctx.splits["train"][1][i]) for i in batch})
        logs = {"reward": float(np.mean([r.reward for r in results])) if results else 0.0}
        candidate = self.propose(ctx, new_demos=new)
        if candidate is not None:
            await self.compete(ctx, candidate)
        return logs

    def propose(self, ctx: TrainingContext, new_demos: int) -> Candidate | None:
        raise NotImplementedError

    async def compete(self, ctx: TrainingContext, candidate: Candidate) -> bool:
        """Score ``candidate`` and the incumbent on one validation minibatch; keep the better."""
        split, indices = ctx.validation_split(), ctx.validation_minibatch()
        await ctx.emit("candidate_proposed", candidate=candidate.id, parent=candidate.parent, origin=candidate.origin)
        incumbent = self.best
        await self.score(ctx, candidate, split, indices)
        await self.score(ctx, incumbent, split, indices)
        mine, theirs, shared = paired_means(candidate, incumbent, split)
        await ctx.emit("candidate_scored", candidate=candidate.id, score=mine, incumbent=incumbent.id,
                       incumbent_score=theirs, examples=shared)
        if mine > theirs:
            await self.accept(ctx, candidate, reason=f"{mine:.3f} > {theirs:.3f} on {shared} validation examples")
            return True
        return False

    def with_examples(self, base: dict[str, Any], chosen: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        variables = {name: dict(value) for name, value in base.items()}
        for name, examples in chosen.items():
            variables[name]["examples"] = examples
        return variables

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "nb_min_examples": self.nb_min_examples,
                "nb_max_examples": self.nb_max_examples, "min_reward": self.pool.min_reward,
                "use_labels": self.use_labels}

    def get_extra_state(self) -> dict[str, Any]:
        return {"pool": self.pool.get_state()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.pool.set_state(state.get("pool", {}))


@register_builtin
class RandomFewShot(FewShotOptimizer):
    """Each step, a random choice of ``nb_min_examples``..``nb_max_examples`` demonstrations per Generator.

    Args:
        few_shot_learning: accepted for compatibility; RandomFewShot always
            learns examples (it is what it does).
        nb_min_examples / nb_max_examples: how many demonstrations per prompt.
        min_reward: a training run must earn at least this to become a demonstration.
        use_labels: when a run scores below ``min_reward``, its ground truth
            may serve as a demonstration (traced successes are preferred).
        seed: fixes the sampling (the trainer's seed is used when None).
    """

    def __init__(self, few_shot_learning: bool = False, nb_min_examples: int = 1, nb_max_examples: int = 3,
                 min_reward: float = 0.5, use_labels: bool = True, seed: int | None = None) -> None:
        super().__init__(nb_min_examples=nb_min_examples, nb_max_examples=nb_max_examples, min_reward=min_reward,
                         use_labels=use_labels, seed=seed)
        self.few_shot_learning = few_shot_learning

    def propose(self, ctx: TrainingContext, new_demos: int) -> Candidate | None:
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
                 use_labels: bool = True, seed: int | None = None) -> None:
        super().__init__(nb_min_examples=nb_min_examples, nb_max_examples=nb_max_examples, min_reward=min_reward,
                         use_labels=use_labels, seed=seed)
        self.tried: set[str] = set()

    def propose(self, ctx: TrainingContext, new_demos: int) -> Candidate | None:
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
