"""What every optimizer gets from the base class: its context, a budget, and the program's prompt states.

- :class:`OptimizerContext`: what an optimizer sees of training (the rollout
  service, the trainer's pace, its random generator, the event stream);
- :class:`Budget`: what the optimizer may spend, counted in program runs
  (``"rollouts"``) or in model calls (``"lm_calls"``);
- :class:`TrainablePrompt` / :func:`trainable_prompts`: each module's trainable
  prompt (instructions + examples), found through the module API, so no
  optimizer parses variable names or recognises a state by its keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import numpy as np

from promptgym.core.deprecation import renamed_names
from promptgym.core.events import Event
from promptgym.rollouts import RolloutService

UNITS = ("rollouts", "lm_calls")


@dataclass
class OptimizerContext:
    """What an optimizer sees of training, passed to every hook.

    ``step`` and ``steps`` are the trainer's (the current step of the epoch,
    steps per epoch), so an optimizer paces its work over the steps left.
    """

    rollouts: RolloutService
    emit: Callable[[Event], Awaitable[None]]
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    epoch: int = 0
    epochs: int = 1
    step: int = 0
    steps: int = 1

    @property
    def steps_left(self) -> int:
        """Training steps left in this ``fit()``, the current one included."""
        return max(1, (self.epochs - self.epoch) * self.steps - self.step)


class Budget:
    """A spending limit in program runs (``"rollouts"``) or model calls (``"lm_calls"``); None: no limit.

    ``usd``: a cap in dollars on every model call of a ``fit()`` (``fit(budget=Budget(usd=4))``, the same
    as ``fit(max_usd=4)``); the run stops cleanly before a call would cross it (see docs/cost.md).

    An LM-call budget prices a rollout at the calls rollouts have cost so far
    (``default_calls_per_rollout`` before the first one), so a caller can ask
    whether a run it has not made yet is affordable::

        budget = Budget(10)
        budget.affordable(4), budget.charge(rollouts=4), budget.remaining   # (True, None, 6)
    """

    def __init__(self, limit: int | None = None, unit: str = "rollouts", default_calls_per_rollout: float = 1.0,
                 usd: float | None = None) -> None:
        if usd is not None and (isinstance(usd, bool) or not isinstance(usd, (int, float)) or usd <= 0):
            raise ValueError(f"Budget(usd=...) must be a number of dollars > 0, got {usd!r}")
        self.usd = float(usd) if usd is not None else None
        if unit not in UNITS:
            raise ValueError(f"a budget counts one of {', '.join(UNITS)}, got {unit!r}")
        if limit is not None and limit < 1:
            raise ValueError(f"a budget's limit must be >= 1 or None, got {limit}")
        self.limit = limit
        self.unit = unit
        self.default_calls_per_rollout = default_calls_per_rollout
        self.spent = 0
        self.rollouts = 0
        """Program runs charged so far (also counted under an LM-call budget)."""
        self.rollout_lm_calls = 0
        """Model calls those runs made (an LM-call budget's price of a rollout)."""

    @property
    def remaining(self) -> float:
        return math.inf if self.limit is None else self.limit - self.spent

    @property
    def exhausted(self) -> bool:
        return self.remaining <= 0

    def calls_per_rollout(self) -> float:
        if self.rollouts:
            return max(1.0, self.rollout_lm_calls / self.rollouts)
        return self.default_calls_per_rollout

    def cost(self, rollouts: int, lm_calls: int = 0) -> float:
        """What ``rollouts`` new program runs and ``lm_calls`` other model calls would spend."""
        if self.unit == "rollouts":
            return rollouts
        return rollouts * self.calls_per_rollout() + lm_calls

    def affordable(self, rollouts: int, lm_calls: int = 0) -> bool:
        return self.cost(rollouts, lm_calls) <= self.remaining

    def charge(self, rollouts: int = 0, lm_calls: int = 0) -> None:
        """Record ``rollouts`` program runs that made ``lm_calls`` model calls (or, alone, other model calls)."""
        self.rollouts += rollouts
        self.rollout_lm_calls += lm_calls if rollouts else 0
        self.spent += rollouts if self.unit == "rollouts" else lm_calls


@dataclass(frozen=True)
class TrainablePrompt:
    """A module's trainable prompt: the variable that holds ``{"instructions", "examples"}``, and its module.

    ``answer_fields`` is set when the module reads the program's input and
    writes its output: a labelled example is then a demonstration of it as
    it stands (the fields of its output), with no call needed.
    """

    variable: str
    module: Any
    answer_fields: frozenset[str] | None = None

    @property
    def module_name(self) -> str:
        return self.module.name


def trainable_prompts(program: Any) -> list[TrainablePrompt]:
    """The trainable prompt of every module of ``program`` that has one, in program order."""
    answering = {id(module) for module in program.answer_modules()}
    states = []
    for module in program.modules:
        variable = module.prompt_variable
        if variable is None or variable not in program.trainable_variables:
            continue
        fields = None
        # an agent's demonstration is a whole trajectory, which a label alone is not
        if id(module) in answering and getattr(module, "labels_are_demonstrations", True):
            fields = frozenset(module.output_data_model(program.input_data_model).model_fields)
        states.append(TrainablePrompt(variable.name, module, fields))
    return states


def variable_owners(program: Any) -> dict[str, str]:
    """The name of the module that owns each of ``program``'s variables."""
    return {variable.name: module.name for module in program.modules for variable in module.variables}


# Old names (one word, one meaning: a prompt is not a "state"), with a DeprecationWarning.
__getattr__ = renamed_names(__name__, {"PromptState": "TrainablePrompt", "prompt_states": "trainable_prompts"},
                            globals())
