"""``compile()``: the reward, optimizer and metrics a program trains with, and their saved form."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from promptgym import metrics as metrics_module
from promptgym import optimizers as optimizers_module
from promptgym import rewards as rewards_module
from promptgym.core.deprecation import renamed_names
from promptgym.core.serialization import deserialize_object, serialize_object
from promptgym.modules.variable import Variable
from promptgym.rollouts import RolloutService


@dataclass
class TrainingSetup:
    """What ``compile()`` resolved, plus what a resumed ``fit()`` needs (see :meth:`trainer_state`)."""

    reward: Any
    optimizer: Any
    metrics: list[Any] = field(default_factory=list)
    rollouts: RolloutService | None = None
    """The rollout service of the running (or last) ``fit()``."""
    position: dict[str, int] | None = None
    """``{"epoch", "step"}``: the next step a resumed ``fit()`` runs."""
    restored: dict[str, Any] | None = None
    """A trainer state read from a file, for the next resumed ``fit()``."""
    spend: dict[str, Any] | None = None
    """What the run spent so far, by phase (``RunSpend.state()``), as of ``position``."""

    def get_config(self) -> dict[str, Any]:
        return {
            "reward": serialize_object(self.reward),
            "optimizer": serialize_object(self.optimizer),
            "metrics": [serialize_object(metric) for metric in self.metrics],
        }

    def trainer_state(self) -> dict[str, Any] | None:
        """Where ``fit()`` is and what its rollouts cost so far (memoised results, failures, random state)."""
        if self.rollouts is None:
            return self.restored
        state = {"position": self.position, "rollouts": self.rollouts.get_state()}
        return {**state, "spend": self.spend} if self.spend is not None else state


def output_fields(program: Any) -> list[str] | None:
    """The output fields the masks are checked against (None when the program can't say yet)."""
    model = program.output_data_model
    if callable(model) and not isinstance(model, type):
        # A module mixed with Trainer (`class P(Trainer, Generator)`): its method, not a program's property
        model = getattr(program, "data_model", None)
    fields = getattr(model, "model_fields", None)
    return list(fields) if fields is not None else None


def compile_setup(program: Any, reward: Any = None, optimizer: Any = None, metrics: list[Any] | None = None
                  ) -> TrainingSetup:
    """Resolve names, instances and config dicts; check the masks against the program's output fields."""
    # Without a reward the program can still predict and evaluate metrics; fit() asks for one.
    resolved_reward = rewards_module.get(reward) if reward is not None else rewards_module.NoReward()
    resolved_optimizer = optimizers_module.get(optimizer if optimizer is not None else "randomfewshot")
    # each program owns its metrics: one instance given to several compile() calls (a sweep) is cloned per program
    resolved_metrics = [clone_metric(metrics_module.get(metric)) for metric in metrics or []]
    resolve_models = getattr(resolved_optimizer, "resolve_models", None)
    if resolve_models is not None:  # the default models, if set by now; else fit() says which call to make
        try:
            resolve_models()
        except ValueError:
            pass
    fields = output_fields(program)
    if fields is not None:
        for scorer in [resolved_reward, *resolved_metrics]:
            scorer.check_fields(fields)
    names = [resolved_reward.name, *[metric.name for metric in resolved_metrics]]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"two scorers are named {duplicates[0]!r}; pass name=... to tell them apart")
    bind_operational(program, resolved_metrics)
    return TrainingSetup(resolved_reward, resolved_optimizer, resolved_metrics)


def clone_metric(metric: Any) -> Any:
    """A fresh copy of ``metric``: the same settings and wrapped function, its own state and binding."""
    clone = copy.copy(metric)
    state = getattr(metric, "_state", None)
    if isinstance(state, Variable):
        clone._state = Variable(state.name, metric.initial_state(), trainable=False)
    if isinstance(getattr(metric, "fn_kwargs", None), dict):
        clone.fn_kwargs = dict(metric.fn_kwargs)
    if hasattr(metric, "program"):  # an operational metric: bound to its program below, not to the caller's
        clone.program, clone._baseline = None, {}
    return clone


def bind_operational(program: Any, metrics: list[Any]) -> None:
    """Operational metrics (tokens, calls, cost) measure this program."""
    for metric in metrics:
        if getattr(metric, "operational", False):
            metric.bind_program(program)


def restore_setup(config: dict[str, Any], optimizer_state: dict[str, Any] | None,
                  trainer_state: dict[str, Any] | None = None) -> TrainingSetup:
    """The compiled state of a loaded program, with the optimizer's progress and the trainer's."""
    reward = deserialize_object(config["reward"], expected="reward")
    optimizer = deserialize_object(config["optimizer"], expected="optimizer")
    metrics = [deserialize_object(item, expected="metric") for item in config.get("metrics", [])]
    optimizer.set_state(optimizer_state)
    return TrainingSetup(reward, optimizer, metrics, restored=trainer_state)


__getattr__ = renamed_names(__name__, {"CompiledState": "TrainingSetup", "compile_state": "compile_setup",
                                       "restore_state": "restore_setup"}, globals())
