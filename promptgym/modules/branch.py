"""``Branch``: a Decision that routes the input to the module of the chosen label.

    easy, hard = await Branch(question="How hard is this query?", labels=["easy", "hard"],
                              branches=[Generator(data_model=Answer, language_model=lm),
                                        ChainOfThought(data_model=Answer, language_model=lm)],
                              language_model=lm)(inputs)
    outputs = easy | hard        # the branch that ran

Every branch not chosen outputs None (and what follows it doesn't run), so
the outputs join with ``|``. The decision is added to the branches' inputs
(``inject_decision``) and to their outputs (``return_decision``). With
``decision_type=MultiDecision`` several branches may run, concurrently.
"""

from __future__ import annotations

import asyncio
from typing import Any

from promptgym.core.operators import compute
from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.modules.decision import Decision
from promptgym.modules.module import Module


@register_builtin
class Branch(Module):
    """Decide, then run the chosen branch(es); one output per label (None where not chosen)."""

    def __init__(self, question: str | None = None, labels: list[str] | None = None, branches: Any = None,
                 language_model: Any = None, inject_decision: bool = True, return_decision: bool = True,
                 decision_type: type[Decision] = Decision, name: str | None = None, description: str | None = None,
                 trainable: bool = True, **decision_options: Any) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        labels = list(labels or [])
        if isinstance(branches, dict):
            branches = [branches.get(label) for label in labels]
        if not branches or len(branches) != len(labels):
            raise ValueError(f"Branch() needs one module per label: {len(labels)} labels, "
                             f"{len(branches or [])} branches")
        self.labels = labels
        self.branches = list(branches)
        self.inject_decision = inject_decision
        self.return_decision = return_decision
        self.decision = decision_type(question=question, labels=labels, language_model=language_model,
                                      name=f"{self.name}_decision", **decision_options)

    async def call(self, inputs: Any, training: bool = False) -> tuple[Any, ...]:
        decision = await self.decision(inputs, training=training)
        chosen = decision.get("choice", decision.get("choices")) if decision is not None else None
        chosen = {chosen} if isinstance(chosen, str) else set(chosen or [])
        branch_inputs = compute("concat", [inputs, decision], name=self.name) if self.inject_decision else inputs

        async def run(label: str, module: Module | None) -> Any:
            if label not in chosen or module is None:
                return None
            output = await module(branch_inputs, training=training)
            return compute("logical_and", [decision, output], name=self.name) if self.return_decision else output

        return tuple(await asyncio.gather(*(run(label, module) for label, module in zip(self.labels, self.branches))))

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> tuple[Any, ...]:
        decision = await self.decision(inputs, training=training)
        branch_inputs = inputs + decision if self.inject_decision else inputs
        outputs = []
        for module in self.branches:
            output = await module(branch_inputs, training=training)
            outputs.append(decision & output if self.return_decision else output)
        return tuple(outputs)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "question": self.decision.question, "labels": self.labels,
                "branches": [serialize_object(module) for module in self.branches],
                "language_model": serialize_object(self.decision.language_model),
                "inject_decision": self.inject_decision, "return_decision": self.return_decision}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Branch":
        config = dict(config)
        config["branches"] = [deserialize_object(item, expected="module") for item in config["branches"]]
        config["language_model"] = deserialize_object(config["language_model"], expected="language model")
        return cls(**config)
