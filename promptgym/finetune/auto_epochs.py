"""``n_epochs="auto"``: how many steps fill a time budget, planned from the run's own first steps.

    plan = plan_budget(AutoBudget(seconds=1200), used_s=31.0, step_s=6.8, eval_s=4.1, steps_done=3,
                       steps_per_epoch=45)
    plan.steps, plan.epochs, plan.eval_steps        # (161, 3.58, 21)

The rules (docs/optimizers/finetune.md, "Training that fills its budget"):

- the held-out rows are evaluated once before training (timed), then the first :data:`MEASURED_STEPS` steps
  are timed; the mean leaves out the first step when there are more (it carries one-time costs: kernel
  choice, allocations);
- :data:`EVALUATIONS` evaluations are spread over the run (fewer when they would take more than
  :data:`EVAL_SHARE` of the budget), the last one at the last step;
- the steps fill what is left, less :data:`MARGIN` of the budget for the spread of step times; the last
  epoch may end partway (its rows drawn from its own shuffle), so the budget is filled to within a step,
  not rounded to whole epochs;
- at most :data:`MAX_EPOCHS` passes over the rows: past that a LoRA adapter mostly memorises its rows,
  and the early stop would have ended the run anyway.

The run then stops early after :attr:`AutoBudget.patience` evaluations in a row not below the best
validation loss so far, and exports the adapter of the best one (:class:`promptgym.finetune.sft_run.SFTRun`).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

clock = time.monotonic
"""The budget's clock (a test advances a fake one instead of training for real seconds)."""

MEASURED_STEPS = 3
EVALUATIONS = 8
EVAL_SHARE = 0.25
MARGIN = 0.05
MAX_EPOCHS = 10
PATIENCE = 2


@dataclass(frozen=True)
class AutoBudget:
    """What ``n_epochs="auto"`` is given: the seconds to fill and the early stop's patience (in evaluations)."""

    seconds: float
    patience: int = PATIENCE


@dataclass(frozen=True)
class BudgetPlan:
    """What the run decided after its first steps; saved in its checkpoints, so a resumed run keeps it."""

    budget_s: float
    step_s: float
    eval_s: float
    measured_steps: int
    steps: int
    steps_per_epoch: int
    eval_steps: int
    patience: int
    capped: str = ""
    """Why the plan holds fewer steps than the budget would (empty when it fills it)."""

    @property
    def epochs(self) -> float:
        return round(self.steps / max(self.steps_per_epoch, 1), 2)

    @property
    def whole_epochs(self) -> int:
        """Epochs the loop runs into (the last one may end partway, at ``steps``)."""
        return max(1, math.ceil(self.steps / max(self.steps_per_epoch, 1)))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "epochs": self.epochs}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BudgetPlan":
        return cls(**{key: value for key, value in data.items() if key != "epochs"})

    def describe(self) -> str:
        """One line for logs and events.

        >>> BudgetPlan(600, 2.0, 1.0, 3, 270, 30, 34, 2).describe()
        '270 steps (9 epochs of 30) in 600 s: 2 s a step, 1 s an evaluation, every 34 steps; early stop after 2 evaluations without a lower validation loss'
        """
        capped = f"; capped: {self.capped}" if self.capped else ""
        return (f"{self.steps} steps ({self.epochs:g} epochs of {self.steps_per_epoch}) in {self.budget_s:g} s: "
                f"{self.step_s:.3g} s a step, {self.eval_s:.3g} s an evaluation, every {self.eval_steps} steps; "
                f"early stop after {self.patience} evaluations without a lower validation loss{capped}")


def step_seconds(measured: list[float]) -> float:
    """The step time to plan with: the mean of the measured steps, the first left out when there are more.

    >>> step_seconds([9.0, 2.0, 4.0])
    3.0
    """
    kept = measured[1:] if len(measured) > 1 else measured
    return sum(kept) / len(kept)


def plan_budget(budget: AutoBudget, used_s: float, step_s: float, eval_s: float, steps_done: int,
                steps_per_epoch: int, measured_steps: int | None = None) -> BudgetPlan:
    """The steps and evaluations that fill ``budget`` after ``used_s`` seconds and ``steps_done`` steps.

    >>> plan = plan_budget(AutoBudget(600), used_s=7.0, step_s=2.0, eval_s=1.0, steps_done=3, steps_per_epoch=100)
    >>> plan.steps, plan.epochs, plan.eval_steps
    (280, 2.8, 35)
    >>> plan_budget(AutoBudget(600), 7.0, 2.0, 1.0, 3, steps_per_epoch=4).capped
    '10 passes over the rows at most'
    """
    evaluations = EVALUATIONS
    if eval_s > 0:
        evaluations = max(1, min(EVALUATIONS, math.floor(EVAL_SHARE * budget.seconds / eval_s)))
    left = budget.seconds * (1 - MARGIN) - used_s - evaluations * eval_s
    more = math.floor(left / step_s) if step_s > 0 else 0
    steps, capped = steps_done + max(0, more), ""
    if steps > MAX_EPOCHS * steps_per_epoch:
        steps, capped = MAX_EPOCHS * steps_per_epoch, f"{MAX_EPOCHS} passes over the rows at most"
    steps = max(steps, steps_done, 1)
    return BudgetPlan(budget_s=budget.seconds, step_s=round(step_s, 4), eval_s=round(eval_s, 4),
                      measured_steps=steps_done if measured_steps is None else measured_steps, steps=steps,
                      steps_per_epoch=steps_per_epoch, eval_steps=max(1, math.ceil(steps / evaluations)),
                      patience=budget.patience, capped=capped)
