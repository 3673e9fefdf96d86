"""The numbers worth plotting in each event, as ``(step, {tag: value})``: one reading for every logger.

    event_scalars(StepEnd(epoch=0, step=3, global_step=4, reward=0.5))   # (4, {"train/step_reward": 0.5})
    event_scalars(SFTStep(step=10, ..., loss=1.2, lr=1e-4))              # (10, {"sft/loss": 1.2, "sft/lr": 0.0001})

Prompt learning (steps, epochs, evaluations), SFT (steps, evaluations) and RL (iterations,
evaluations) all map here, so TensorBoard, MLflow and the CLI's ``[logging]`` show the same tags.
"""

from __future__ import annotations

import math
from typing import Any

from promptgym.core.events import (
    EpochEnd, Evaluated, Event, RLEvaluation, RLIteration, SFTEval, SFTStep, StepEnd,
)

SFT_FIELDS = ("loss", "lr", "tokens_per_s", "grad_norm", "eval_loss")
RL_FIELDS = ("mean_reward", "reward_spread", "loss", "kl", "clip_fraction", "lr", "tokens_per_s", "failed_rollouts",
             "zero_signal_groups", "completion_tokens")


def number(value: Any) -> float | None:
    """A finite float, or None (strings, None, NaN and infinities are not plotted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "item"):
        return None
    try:
        value = float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _pick(prefix: str, values: dict[str, Any], names: Any = None) -> dict[str, float]:
    chosen = {name: number(values.get(name)) for name in (names if names is not None else values)}
    return {f"{prefix}/{name}": value for name, value in chosen.items() if value is not None}


def event_scalars(event: Event) -> tuple[int, dict[str, float]] | None:
    """``(step, {tag: value})`` for an event with numbers to plot, else None."""
    if isinstance(event, StepEnd):
        return event.global_step, _pick("train", {"step_reward": event.reward})
    if isinstance(event, EpochEnd):
        return event.epoch + 1, _pick("epoch", event.logs)
    if isinstance(event, Evaluated):
        return 0, _pick(f"eval_{event.label}", event.logs)
    if isinstance(event, SFTStep):
        return event.step, _pick("sft", event.payload(), SFT_FIELDS)
    if isinstance(event, SFTEval):
        return event.step, _pick("sft", {f"eval_loss_{event.label}": event.eval_loss})
    if isinstance(event, RLIteration):
        return event.iteration, _pick("rl", event.payload(), RL_FIELDS)
    if isinstance(event, RLEvaluation):
        return event.iteration, _pick(f"rl_eval_{event.split}", {"reward": event.reward, "failures": event.failures})
    return None
