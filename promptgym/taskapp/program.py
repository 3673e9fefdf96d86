"""Prompt learning against a task app: the app is the data source and the reward.

``TaskAppProgram`` holds one trainable variable per policy module the app
declares (instructions + examples, like a Generator). Running it on a
``Seed`` posts a rollout with the candidate's variables; the app's reward
becomes the prediction, its trajectory becomes the trace (so few-shot
optimizers learn demonstrations from it), and ``TaskAppReward`` reads the
reward back for the trainer::

    info = await TaskAppClient(url).task_info()
    program = TaskAppProgram(task_url=url, modules=[m.model_dump() for m in info.modules], model="local/...")
    program.compile(reward=TaskAppReward(), optimizer="randomfewshot")
    await program.fit(x=seeds(info.splits["train"]), y=targets(...))
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from promptgym.core.data_model import DataModel, Field
from promptgym.core.serialization import register_builtin
from promptgym.datasets.loaders import to_object_array
from promptgym.modules.module import Module
from promptgym.modules.tracing import record_step
from promptgym.modules.variable import prompt_state_problem
from promptgym.modules.variable import Variable
from promptgym.programs.program import Program
from promptgym.rewards.base import Reward, RewardResult
from promptgym.taskapp.client import TaskAppClient
from promptgym.taskapp.protocol import Policy, RolloutRequest


class Seed(DataModel):
    seed: int = Field(description="Which task instance to roll out")
    split: str = Field("train", description="train, validation or test")


class RolloutOutcome(DataModel):
    reward: float = Field(0.0, description="The task app's reward")
    feedback: str = Field("", description="The task app's feedback")


def seeds(values: list[int], split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` arrays for a list of seeds (targets are empty: the app scores)."""
    return to_object_array(Seed(seed=s, split=split) for s in values), to_object_array({} for _ in values)


@register_builtin
class RemotePolicy(Module):
    """A policy step run by the task app; its instructions and examples are trainable here."""

    def __init__(self, instructions: str = "", examples: list[dict[str, Any]] | None = None,
                 name: str | None = "policy", description: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        self.state = self.add_variable("state", {"instructions": instructions, "examples": list(examples or [])},
                                       description="instructions and few-shot examples", check=prompt_state_problem)

    @property
    def prompt_variable(self) -> Variable:
        return self.state

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.state.get_json()}


@register_builtin
class TaskAppProgram(Program):
    """A program whose every call is one rollout of a task app (see the module docstring)."""

    def __init__(self, task_url: str, modules: list[dict[str, Any]] | None = None, model: str = "",
                 inference_url: str | None = None, api_key_env: str | None = "TASK_APP_API_KEY",
                 concurrency: int = 4, timeout: float = 60.0, retries: int = 2, name: str | None = None,
                 description: str | None = None, trainable: bool = True) -> None:
        super().__init__(name=name or "task_app_program", description=description, trainable=trainable)
        self.task_url = task_url
        self.model = model
        self.inference_url = inference_url
        self.api_key_env = api_key_env
        self.client_options = {"concurrency": concurrency, "timeout": timeout, "retries": retries}
        self._client: TaskAppClient | None = None
        for spec in modules or [{"name": "policy"}]:
            policy = RemotePolicy(**{key: spec[key] for key in ("name", "instructions", "examples") if key in spec})
            setattr(self, f"policy_{policy.name}", policy)

    @property
    def client(self) -> TaskAppClient:
        if self._client is None:
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            self._client = TaskAppClient(self.task_url, api_key=key, **self.client_options)
        return self._client

    @property
    def input_data_model(self) -> type[DataModel]:
        return Seed

    @property
    def output_data_model(self) -> type[DataModel]:  # type: ignore[override]
        return RolloutOutcome

    async def call(self, inputs: Any, training: bool = False) -> RolloutOutcome:
        seed = self.validate_input(inputs)
        variables = {module.name: module.state.get_json() for module in self.modules if isinstance(module, RemotePolicy)}
        request = RolloutRequest(seed=seed.seed, split=seed.split,
                                 policy=Policy(model=self.model, inference_url=self.inference_url, variables=variables))
        response = await self.client.rollout(request)
        for step in response.trajectory:
            record_step(step.module, step.inputs, step.outputs)
        return RolloutOutcome(reward=response.reward, feedback=response.feedback)

    def get_config(self) -> dict[str, Any]:
        modules = [{"name": m.name, **m.state.get_json()} for m in self.modules if isinstance(m, RemotePolicy)]
        return {"name": self.name, "description": self.description, "trainable": self.trainable,
                "task_url": self.task_url, "modules": modules, "model": self.model,
                "inference_url": self.inference_url, "api_key_env": self.api_key_env, **self.client_options}


@register_builtin
class TaskAppReward(Reward):
    """The reward the task app gave the rollout (and its feedback)."""

    async def compute(self, y_true: Any, y_pred: Any) -> RewardResult:
        return RewardResult(float(y_pred.get("reward", 0.0)), str(y_pred.get("feedback", "")))
