"""OMEGA's breeding: which variable to change, the mutation / crossover / grounded request the LM answers,
the guard rails a child passes before it costs a validation call, and the demonstrations it gets.

Each part works alone::

    credit = VariableCredit()
    credit.credit(results, ["qa/state"], owners={"qa/state": "qa"})
    credit.choose(["qa/state", "judge/state"], rng)        # likelier: the worse-rewarded variable
    writer = ChildWriter(max_instruction_length=800, max_evidence=6)
    messages, schema, validation = writer.request("mutation", "qa/state", value, results, rollouts, rng, 0.4)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.optimizers.base import Candidate
from promptgym.optimizers.demo_pool import DemoSampler
from promptgym.optimizers.dns import softmax, variable_probabilities
from promptgym.optimizers.guard_rails import instruction_problem
from promptgym.optimizers.omega_prompts import (
    evidence,
    labelled_examples,
    mutable_schema,
    step_request,
    string_leaves,
)
from promptgym.rewards.base import to_json
from promptgym.rollouts import ExampleResult, RolloutService


class VariableCredit:
    """Each variable's running reward (total, count); the worst-rewarded is the likeliest to be mutated."""

    def __init__(self) -> None:
        self.rewards: dict[str, list[float]] = {}

    def credit(self, results: list[ExampleResult], names: list[str], owners: dict[str, str]) -> None:
        """Each example's reward counts for the variables whose module ran on it (all, if none traced)."""
        for result in results:
            ran = {step.module for step in result.trace.steps}
            for name in names:
                if not ran or owners.get(name) in ran:
                    total = self.rewards.setdefault(name, [0.0, 0.0])
                    total[0] += result.reward
                    total[1] += 1

    def average(self, name: str) -> float:
        total, count = self.rewards.get(name, [0.0, 0.0])
        return total / count if count else 0.0

    def choose(self, names: list[str], rng: np.random.Generator) -> str:
        probabilities = variable_probabilities([self.average(n) for n in names])
        return names[int(rng.choice(len(names), p=probabilities))]


class ChildWriter:
    """The LM request that writes a child's variable (mutation, crossover or grounded rewrite) and the guard
    rails its answer passes."""

    def __init__(self, instructions: str = "", max_instruction_length: int = 800, max_evidence: int = 6) -> None:
        self.instructions = instructions
        self.max_instruction_length = max_instruction_length
        self.max_evidence = max_evidence
        self.program_description = ""
        self.variable_descriptions: dict[str, str] = {}
        self.labels: set[str] = set()
        """The task's short output values: a "rewrite" equal to one of them is an answer, not instructions."""

    def schema_for(self, value: Any) -> dict[str, Any] | None:
        return mutable_schema(value, self.max_instruction_length) if isinstance(value, dict) else None

    def request(self, operation: str, name: str, value: dict[str, Any], results: list[ExampleResult],
                rollouts: RolloutService, rng: np.random.Generator, average_reward: float,
                other_value: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict, dict]:
        """The messages, constrained schema and validation schema of the step that writes ``name``'s new value."""
        schema = self.schema_for(value)
        assert schema is not None
        fields = list(schema["properties"])
        inputs: dict[str, Any] = {
            "program": self.program_description,
            "variable": name,
            "variable_description": self.variable_descriptions.get(name, ""),
            "average_reward": round(average_reward, 3),
            "batch": evidence(results, rollouts, self.max_evidence),
            "current_value": {key: value[key] for key in fields},
        }
        if other_value is not None:
            inputs["other_value"] = {key: other_value.get(key) for key in fields}
        if operation == "grounded":
            inputs["examples"] = labelled_examples(rollouts, rng)
        return step_request(operation, schema, inputs, self.instructions)

    def problem(self, name: str, value: dict[str, Any], new_fields: dict[str, Any], results: list[ExampleResult],
                candidates: list[Candidate]) -> str | None:
        """Why the LM's new fields are not worth a validation call (guard rails), or None."""
        changed = [key for key, item in new_fields.items() if item != value.get(key)]
        if not changed:
            return "copy of the parent"
        labels = set(self.labels)
        labels |= {leaf for r in results if r.prediction is not None for leaf in string_leaves(to_json(r.prediction))}
        for key in changed:
            item = new_fields[key]
            texts = item if isinstance(item, list) else [item]
            for text in texts:
                if not isinstance(text, str):
                    continue
                known = [c.variables.get(name, {}).get(key) for c in candidates]
                problem = instruction_problem(text, parent=str(value.get(key, "")), labels=labels,
                                              max_length=self.max_instruction_length,
                                              known=[k for k in known if isinstance(k, str)])
                if problem is not None:
                    return f"{key}: {problem}"
        return None


def sample_examples(demos: DemoSampler, module: str, temperature: float, rng: np.random.Generator
                    ) -> list[dict[str, Any]]:
    """``nb_min_examples``..``nb_max_examples`` demos of ``module``, drawn by softmax(reward / temperature)."""
    pool = demos.pool.for_module(module)
    if not pool:
        return []
    count = min(demos.count(rng), len(pool))
    if count == 0:
        return []
    weights = softmax([demo.reward - 0.1 * demo.labeled for demo in pool], temperature)
    chosen = rng.choice(len(pool), size=count, replace=False, p=weights)
    return [pool[i].as_example() for i in sorted(chosen)]


def crossover_examples(rng: np.random.Generator, mine: dict[str, Any], theirs: dict[str, Any], most: int
                       ) -> list[dict[str, Any]]:
    """Both parents' demonstrations (each once), or ``most`` of them drawn at random."""
    merged: list[dict[str, Any]] = []
    for example in list(mine.get("examples", [])) + list(theirs.get("examples", [])):
        if example not in merged:
            merged.append(example)
    if len(merged) <= most:
        return merged
    chosen = rng.choice(len(merged), size=most, replace=False)
    return [merged[i] for i in sorted(chosen)]
