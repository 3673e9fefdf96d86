"""The ``[rl]`` config section and the Python API's settings of reinforcement learning (GRPO with LoRA).

    settings = RLSettings(base_model="local/smollm2-135m-instruct", group_size=4, batch_size=4, iterations=30)

Unknown keys are errors. Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from promptgym.finetune.settings import LoraSettings, WeightTrainingSettings


def _rl_lora() -> LoraSettings:
    # No dropout: the update then scores the sampled tokens with exactly the function that sampled them.
    return LoraSettings(dropout=0.0)


class RLSettings(WeightTrainingSettings):
    """GRPO on a task app: ``batch_size`` seeds per iteration, ``group_size`` rollouts of each seed.

    Rewards are compared within a seed's group (the advantage of a rollout is its reward minus the group's
    mean, divided by the group's standard deviation when ``scale_rewards``); a group whose rewards are all
    equal carries no signal and is left out of the update.
    """

    algorithm: Literal["grpo"] = "grpo"
    lora: LoraSettings = Field(default_factory=_rl_lora)
    learning_rate: float = Field(5e-5, gt=0)
    group_size: int = Field(4, ge=2, description="rollouts per seed; their rewards are compared with each other")
    batch_size: int = Field(4, ge=1, description="seeds per iteration")
    iterations: int = Field(20, ge=1)
    max_new_tokens: int = Field(64, ge=1, description="at most this many tokens per policy call")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of training rollouts (evaluation is greedy)")
    beta: float = Field(0.0, ge=0, description="weight of the KL penalty to the base model (0: none)")
    clip: float = Field(0.2, gt=0, lt=1, description="ratio clipping (matters when updates_per_batch > 1)")
    updates_per_batch: int = Field(1, ge=1, description="optimiser steps on each iteration's rollouts")
    micro_batch_size: int = Field(8, ge=1, description="completions per forward/backward pass")
    scale_rewards: bool = Field(True, description="divide advantages by the group's standard deviation")
    eval_every: int = Field(5, ge=0, description="evaluate on the validation seeds every N iterations (0: never)")
    save_steps: int = Field(10, ge=1, description="checkpoint every N iterations (and at the end, and on a stop)")
    max_errors: int | None = Field(None, ge=0, description="failed rollouts tolerated before the run stops "
                                                           "(default: any number, unless an iteration fails whole)")
    loss_chunk_size: int = Field(512, ge=16, description="positions per chunk of the output layer in the loss")

    @field_validator("gradient_checkpointing")
    @classmethod
    def _no_checkpointing(cls, value: bool) -> bool:
        # The update encodes each prompt once and hands its key/value cache to the rows of its group;
        # recomputing activations would need the cache off. Refuse rather than accept and ignore it.
        if value:
            raise ValueError("gradient_checkpointing is not available in RL (the update shares each prompt's "
                             "key/value cache among its group's rows); lower micro_batch_size to save memory instead")
        return value

    @model_validator(mode="after")
    def _no_dropout_unless_asked(self) -> "RLSettings":
        # An [rl.lora] table that sets r or alpha only must not bring back LoraSettings' SFT default (0.05).
        if "dropout" not in self.lora.model_fields_set:
            self.lora = self.lora.model_copy(update={"dropout": 0.0})
        return self
