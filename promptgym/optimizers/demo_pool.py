"""The pool of demonstrations: Generator steps from well-scored training runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from promptgym.modules.generator import as_json
from promptgym.optimizers.kit import TrainablePrompt
from promptgym.rewards.base import to_json
from promptgym.rollouts import ExampleResult, RolloutService


@dataclass
class Demo:
    module: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    reward: float
    index: int
    labeled: bool = False

    def as_example(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "outputs": self.outputs}


class DemoPool:
    """Per module, the best demonstration seen for each training example."""

    def __init__(self, min_reward: float = 0.5) -> None:
        self.min_reward = min_reward
        self.demos: dict[str, dict[int, Demo]] = {}

    def add(self, results: list[ExampleResult]) -> int:
        """Add the steps of every result that earned at least ``min_reward``; returns how many are new."""
        added = 0
        for result in results:
            if result.error or result.reward < self.min_reward:
                continue
            for step in result.trace.steps:
                slot = self.demos.setdefault(step.module, {})
                known = slot.get(result.index)
                if known is None or result.reward > known.reward:
                    added += known is None
                    slot[result.index] = Demo(step.module, step.inputs, step.outputs, result.reward, result.index)
        return added

    def add_labels(self, results: list[ExampleResult], targets: dict[int, dict[str, Any]]) -> int:
        """Demos from ground truth for examples the program got wrong.

        Only for a step whose output has exactly the target's fields (the
        step that produces the program's answer); its inputs come from the
        trace, its outputs from the label. Traced successes always win.
        """
        added = 0
        for result in results:
            target = targets.get(result.index)
            if target is None or result.reward >= self.min_reward:
                continue
            for step in reversed(result.trace.steps):
                if set(step.outputs) != set(target):
                    continue
                slot = self.demos.setdefault(step.module, {})
                if result.index not in slot:
                    slot[result.index] = Demo(step.module, step.inputs, dict(target), 1.0, result.index, labeled=True)
                    added += 1
                break
        return added

    def add_label(self, module: str, index: int, inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
        """A labelled example as a demonstration of ``module`` (unless example ``index`` already has one)."""
        slot = self.demos.setdefault(module, {})
        if index in slot:
            return False
        slot[index] = Demo(module, inputs, outputs, 1.0, index, labeled=True)
        return True

    def indices_shown(self, module: str, examples: list[dict[str, Any]]) -> set[int]:
        """The training examples whose demonstrations appear in ``examples``."""
        return {demo.index for demo in self.demos.get(module, {}).values() if demo.as_example() in examples}

    def for_module(self, module: str) -> list[Demo]:
        return sorted(self.demos.get(module, {}).values(), key=lambda demo: (-demo.reward, demo.labeled, demo.index))

    def sample(self, module: str, count: int, rng: np.random.Generator, sampling: str = "softmax",
               temperature: float = 0.3) -> list[Demo]:
        """``count`` distinct demos (see :func:`pick`)."""
        demos = self.for_module(module)
        return pick(demos, [demo.reward for demo in demos], count, rng, sampling, temperature,
                    tiers=[(demo.reward, demo.labeled) for demo in demos])

    def size(self) -> int:
        return sum(len(slot) for slot in self.demos.values())

    def get_state(self) -> dict[str, Any]:
        return {"min_reward": self.min_reward,
                "demos": [asdict(demo) for slot in self.demos.values() for demo in slot.values()]}

    def set_state(self, state: dict[str, Any]) -> None:
        self.min_reward = state.get("min_reward", self.min_reward)
        self.demos = {}
        for item in state.get("demos", []):
            demo = Demo(**item)
            self.demos.setdefault(demo.module, {})[demo.index] = demo


def seed_labelled_demos(pool: DemoPool, rollouts: RolloutService, prompts: list[TrainablePrompt]) -> set[str]:
    """Put every labelled training example in ``pool`` for each of ``prompts`` whose module answers directly.

    A module answers directly when it reads the program's input and writes
    its output, with the label's fields: a successful run of it would
    produce exactly the labelled example, so no call is needed to get one.
    Returns the names of the modules that got demonstrations.
    """
    targets = rollouts.targets("train")
    if not targets:
        return set()
    target_fields, seeded = frozenset(to_json(targets[0]) or {}), set()
    for state in prompts:
        if state.answer_fields != target_fields:
            continue
        for index, (x, y) in enumerate(zip(rollouts.inputs("train"), targets)):
            pool.add_label(state.module_name, index, as_json(x), to_json(y) or {})
        seeded.add(state.module_name)
    return seeded


SAMPLINGS = ("softmax", "best", "random")


def pick(items: list[Any], rewards: list[float], count: int, rng: np.random.Generator, sampling: str = "softmax",
         temperature: float = 0.3, tiers: list[Any] | None = None) -> list[Any]:
    """``count`` distinct items by reward: ``"best"`` the highest first; ``"random"`` uniformly; ``"softmax"``
    the best tier first (uniformly within it), then the others drawn by softmax(reward / temperature)."""
    if not items or count <= 0:
        return []
    count = min(count, len(items))
    if sampling == "best":
        order = sorted(range(len(items)), key=lambda i: -rewards[i])
        return [items[i] for i in order[:count]]
    if sampling == "random":
        return [items[i] for i in rng.permutation(len(items))[:count]]
    tiers = tiers if tiers is not None else list(rewards)
    best = max(tiers)
    top = [i for i in range(len(items)) if tiers[i] == best]
    rest = [i for i in range(len(items)) if tiers[i] != best]
    chosen = [top[i] for i in rng.permutation(len(top))[:count]]
    if len(chosen) < count and rest:
        weights = np.exp((np.array([rewards[i] for i in rest]) - max(rewards)) / temperature)
        drawn = rng.choice(len(rest), size=count - len(chosen), replace=False, p=weights / weights.sum())
        chosen += [rest[int(i)] for i in drawn]
    return [items[i] for i in chosen]


class DemoSampler:
    """The demonstrations a few-shot search learns and draws: a :class:`DemoPool` and how many to show.

    Few-shot optimizers, OMEGA, GEPA and MIPRO each hold one (composition, not
    inheritance): it fills the pool from labels (:meth:`seed`) and from
    scored training runs (:meth:`learn`), says which training examples a
    candidate shows (:meth:`shown`: scoring it there would leak), and draws
    demonstrations (:meth:`draw`).
    """

    def __init__(self, nb_min_examples: int = 1, nb_max_examples: int = 3, min_reward: float = 0.5,
                 use_labels: bool = True, sampling: str = "softmax", sampling_temperature: float = 0.3) -> None:
        if not 0 <= nb_min_examples <= nb_max_examples:
            raise ValueError(f"need 0 <= nb_min_examples <= nb_max_examples, got {nb_min_examples} and {nb_max_examples}")
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {', '.join(map(repr, SAMPLINGS))}, got {sampling!r}")
        self.sampling = sampling
        self.sampling_temperature = sampling_temperature
        self.nb_min_examples = nb_min_examples
        self.nb_max_examples = nb_max_examples
        self.use_labels = use_labels
        self.pool = DemoPool(min_reward=min_reward)
        self.labelled_modules: set[str] = set()

    def seed(self, rollouts: RolloutService, prompts: list[TrainablePrompt]) -> None:
        """Labelled training examples become demonstrations of the modules that answer directly."""
        self.labelled_modules = seed_labelled_demos(self.pool, rollouts, prompts) if self.use_labels else set()

    def needs_traces(self, prompts: list[TrainablePrompt]) -> bool:
        """Whether some module can only learn from traces (it did not get labelled demonstrations)."""
        return any(state.module_name not in self.labelled_modules for state in prompts)

    def learn(self, rollouts: RolloutService, results: list[ExampleResult]) -> None:
        """Well-scored training runs join the pool; with labels, so do the answers to failed ones."""
        self.pool.add(results)
        if self.use_labels:
            self.pool.add_labels(results, {r.index: rollouts.target_json("train", r.index) for r in results})

    def shown(self, variables: dict[str, Any], prompts: list[TrainablePrompt]) -> set[int]:
        """Training examples whose demonstrations ``variables`` show."""
        return {index for state in prompts
                for index in self.pool.indices_shown(state.module_name, variables[state.variable].get("examples", []))}

    def count(self, rng: np.random.Generator) -> int:
        """How many demonstrations to show: drawn in [nb_min_examples, nb_max_examples]."""
        return int(rng.integers(self.nb_min_examples, self.nb_max_examples + 1))

    def draw(self, module: str, rng: np.random.Generator, count: int | None = None) -> list[dict[str, Any]]:
        """``count`` (default :meth:`count`) demonstrations of ``module``, the highest-reward ones first."""
        chosen = self.pool.sample(module, self.count(rng) if count is None else count, rng, self.sampling,
                                  self.sampling_temperature)
        return [demo.as_example() for demo in chosen]

    @staticmethod
    def with_examples(variables: dict[str, Any], chosen: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        """``variables`` with the examples of each variable in ``chosen`` replaced."""
        result = {name: dict(value) for name, value in variables.items()}
        for name, examples in chosen.items():
            result[name]["examples"] = examples
        return result


class FewShotArguments:
    """The few-shot constructor arguments, readable as attributes (Keras style), held by ``demos`` and ``budget``."""

    demos: DemoSampler
    budget: Any

    @property
    def nb_min_examples(self) -> int:
        return self.demos.nb_min_examples

    @property
    def nb_max_examples(self) -> int:
        return self.demos.nb_max_examples

    @property
    def min_reward(self) -> float:
        return self.demos.pool.min_reward

    @property
    def use_labels(self) -> bool:
        return self.demos.use_labels

    @property
    def max_metric_calls(self) -> int | None:
        return self.budget.limit

    @property
    def metric_calls(self) -> int:
        """Program runs spent so far (the budget's unit; an optimizer's own model calls are not counted)."""
        return int(self.budget.spent)
