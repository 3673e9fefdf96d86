"""What the RL trainer needs from a task: seeds, and an episode run against the policy's URL that ends in a reward.

    class Echo:
        name, splits = "echo", {"train": [0, 1, 2], "test": [10, 11]}

        async def episode(self, seed, split, policy_url):
            reply = await chat(policy_url(), [{"role": "user", "content": f"Say {seed}"}])   # any OpenAI client
            return Episode(reward=float(reply.strip() == str(seed)))

``policy_url()`` returns the OpenAI-compatible base URL (``.../v1``) that serves the current policy for this
episode; call it again for each new attempt (a retry): the completions of an abandoned attempt are then
dropped, and only those of the attempt that returned the reward are trained on. An episode that can't
finish raises; the trainer logs it and leaves it out. ``promptgym.taskapp.TaskAppEnvironment`` is the
task-app protocol's environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol


@dataclass(frozen=True)
class Episode:
    """The outcome of one episode: its reward (higher is better), and optional metrics and feedback."""

    reward: float
    metrics: dict[str, float] = field(default_factory=dict)
    feedback: str = ""


class Environment(Protocol):
    name: str
    splits: dict[str, list[int]]

    async def episode(self, seed: int, split: str, policy_url: Callable[[], str]) -> Episode: ...
