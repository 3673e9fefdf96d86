"""The task-app wire format (see docs/taskapp.md).

``GET /health`` -> :class:`Health`; ``GET /task_info`` -> :class:`TaskInfo`;
``POST /rollout`` with :class:`RolloutRequest` -> :class:`RolloutResponse`.
Every request carries ``X-API-Key`` when the app was started with a key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

API_KEY_HEADER = "X-API-Key"
PROTOCOL_VERSION = 1


class Health(BaseModel):
    status: str = "ok"
    protocol: int = PROTOCOL_VERSION


class PolicyModule(BaseModel):
    """A trainable step of the policy: its name and starting prompt."""

    name: str = "policy"
    instructions: str = ""
    examples: list[dict[str, Any]] = Field(default_factory=list)


class TaskInfo(BaseModel):
    """What the app does, which seeds make up each split, and the policy's modules."""

    name: str
    description: str = ""
    splits: dict[str, list[int]] = Field(default_factory=dict, description="split name -> seeds, e.g. train/validation/test")
    modules: list[PolicyModule] = Field(default_factory=lambda: [PolicyModule()])


class Policy(BaseModel):
    """Who acts: the model, where to reach it, and the candidate's variables (per module name)."""

    model: str
    inference_url: str | None = None
    variables: dict[str, dict[str, Any]] = Field(default_factory=dict)


class RolloutRequest(BaseModel):
    seed: int
    policy: Policy
    split: str = "train"


class TrajectoryStep(BaseModel):
    """One policy call: module name, what it saw, what it answered."""

    module: str = "policy"
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)


class RolloutResponse(BaseModel):
    seed: int
    reward: float
    feedback: str = ""
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
