"""The pool of demonstrations: Generator steps from well-scored training runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from promptgym.modules.generator import as_json
from promptgym.rewards.base import to_json
from promptgym.training.context import ExampleResult, TrainingContext


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

    def sample(self, module: str, count: int, rng: np.random.Generator) -> list[Demo]:
        """``count`` distinct demos, drawn uniformly among the highest-reward ones first."""
        demos = self.for_module(module)
        if not demos:
            return []
        best = (demos[0].reward, demos[0].labeled)
        top = [demo for demo in demos if (demo.reward, demo.labeled) == best]
        rest = [demo for demo in demos if (demo.reward, demo.labeled) != best]
        chosen = [top[i] for i in rng.permutation(len(top))[:count]]
        if len(chosen) < count and rest:
            chosen += [rest[i] for i in rng.permutation(len(rest))[: count - len(chosen)]]
        return chosen

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


def seed_labelled_demos(pool: DemoPool, ctx: TrainingContext, modules: set[str]) -> set[str]:
    """Put every labelled training example in ``pool`` for each of ``modules`` that answers directly.

    A module answers directly when it reads the program's input and writes
    its output, with the label's fields: a successful run of it would
    produce exactly the labelled example, so no call is needed to get one.
    Returns the names of the modules that got demonstrations.
    """
    xs, ys = ctx.splits["train"]
    if not len(ys):
        return set()
    target_fields, seeded = set(to_json(ys[0]) or {}), set()
    for module in ctx.program.answer_modules():
        fields = set(module.output_data_model(ctx.program.input_data_model).model_fields)
        if module.name not in modules or fields != target_fields:
            continue
        for index, (x, y) in enumerate(zip(xs, ys)):
            pool.add_label(module.name, index, as_json(x), to_json(y) or {})
        seeded.add(module.name)
    return seeded
