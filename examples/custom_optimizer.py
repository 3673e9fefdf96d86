"""A complete optimizer on the kit: try hand-written instructions, keep the one that wins its race."""

from typing import Any

import promptgym as pg
from promptgym.optimizers import racing
from promptgym.optimizers.base import Optimizer
from promptgym.optimizers.kit import Budget, OptimizerContext


@pg.saving.register_synalinks_serializable()
class InstructionList(Optimizer):
    """Each step, the incumbent with the next of ``instructions`` races the incumbent on validation examples."""

    def __init__(self, instructions: list[str], max_metric_calls: int | None = None, seed: int | None = None):
        super().__init__(seed=seed, budget=Budget(max_metric_calls, unit="rollouts"))
        self.instructions = list(instructions)
        self.tried = 0

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        if self.tried < len(self.instructions) and not self.budget.exhausted:
            text, self.tried = self.instructions[self.tried], self.tried + 1
            variables = {name: dict(value) for name, value in self.best.variables.items()}
            for state in self.prompts:  # every Generator's prompt, found through the module API
                variables[state.variable]["instructions"] = text
            if self.find(variables) is None:
                candidate = self.add_candidate(variables, parent=self.best.id, origin="instruction_list")
                await racing.compete(self, ctx, candidate, hidden=set())  # accepts it if it wins
        return {"tried": self.tried, "metric_calls": self.budget.spent}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "instructions": self.instructions, "max_metric_calls": self.budget.limit}

    def get_extra_state(self) -> dict[str, Any]:
        return {"tried": self.tried, "metric_calls": self.budget.spent}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.tried = int(state.get("tried", 0))
        self.budget.spent = int(state.get("metric_calls", 0))
