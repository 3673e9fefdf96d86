"""A task app as an RL environment: each episode is one ``POST /rollout`` whose policy is the trainer's server.

    environment = await TaskAppEnvironment.connect("http://127.0.0.1:8001", api_key=key)
    result = await RLJob.prepare(settings).run(environment, "runs/rl")

The app is told to use ``policy.inference_url`` (an OpenAI-compatible ``.../v1`` URL of the policy server,
fresh for every attempt) with the starting prompts it declared in ``/task_info``; its reward is the episode's.
"""

from __future__ import annotations

from typing import Any, Callable

from promptgym.finetune.rl.environment import Episode
from promptgym.taskapp.client import TaskAppClient
from promptgym.taskapp.protocol import Policy, RolloutRequest, TaskInfo


class TaskAppEnvironment:
    """The task-app protocol (docs/taskapp.md) as :class:`promptgym.finetune.rl.Environment`."""

    def __init__(self, client: TaskAppClient, info: TaskInfo, model: str = "policy") -> None:
        self.client, self.info, self.model = client, info, model
        self.name = info.name
        self.splits = {name: list(seeds) for name, seeds in info.splits.items()}
        self.variables = {module.name: {"instructions": module.instructions, "examples": module.examples}
                          for module in info.modules}

    @classmethod
    async def connect(cls, url: str, api_key: str | None = None, model: str = "policy", **client_options: Any
                      ) -> "TaskAppEnvironment":
        """Check the app (health, then ``/task_info`` with the key): a down app or a refused key is a TaskAppError."""
        client = TaskAppClient(url, api_key=api_key, **client_options)
        return cls(client, await client.check(), model)

    async def episode(self, seed: int, split: str, policy_url: Callable[[], str]) -> Episode:
        def request() -> RolloutRequest:
            return RolloutRequest(seed=seed, split=split, policy=Policy(model=self.model, inference_url=policy_url(),
                                                                        variables=self.variables))

        response = await self.client.rollout(request)
        return Episode(reward=response.reward, metrics=dict(response.metrics), feedback=response.feedback)
