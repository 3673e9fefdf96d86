"""``program.compile()``: resolve the reward, optimizer and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from promptgym.core.serialization import deserialize_object, serialize_object


@dataclass
class CompiledState:
    reward: Any
    optimizer: Any
    metrics: list[Any] = field(default_factory=list)

    def get_config(self) -> dict[str, Any]:
        return {
            "reward": serialize_object(self.reward),
            "optimizer": serialize_object(self.optimizer),
            "metrics": [serialize_object(metric) for metric in self.metrics],
        }


def _output_fields(program: Any) -> list[str] | None:
    model = program.output_data_model
    return list(model.model_fields) if model is not None else None


def compile_program(program: Any, reward: Any = None, optimizer: Any = None, metrics: list[Any] | None = None) -> None:
    from promptgym import metrics as metrics_module
    from promptgym import optimizers as optimizers_module
    from promptgym import rewards as rewards_module

    if reward is None:
        raise ValueError("compile() needs reward= (for example promptgym.rewards.ExactMatch() or 'exactmatch')")
    resolved_reward = rewards_module.get(reward)
    resolved_optimizer = optimizers_module.get(optimizer if optimizer is not None else "randomfewshot")
    resolved_metrics = [metrics_module.get(metric) for metric in metrics or []]
    fields = _output_fields(program)
    if fields is not None:
        for scorer in [resolved_reward, *resolved_metrics]:
            scorer.check_fields(fields)
    names = [resolved_reward.name, *[metric.name for metric in resolved_metrics]]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"two scorers are named {duplicates[0]!r}; pass name=... to tell them apart")
    program.training_state = CompiledState(resolved_reward, resolved_optimizer, resolved_metrics)


def restore_compiled(program: Any, config: dict[str, Any], optimizer_state: dict[str, Any] | None) -> None:
    """Rebuild the compiled state of a loaded program, including the optimizer's progress."""
    reward = deserialize_object(config["reward"], expected="reward")
    optimizer = deserialize_object(config["optimizer"], expected="optimizer")
    metrics = [deserialize_object(item, expected="metric") for item in config.get("metrics", [])]
    optimizer.set_state(optimizer_state)
    program.training_state = CompiledState(reward, optimizer, metrics)
