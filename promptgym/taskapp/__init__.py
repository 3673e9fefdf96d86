"""Task apps: HTTP services that own a task and score rollouts (protocol in docs/taskapp.md).

    from promptgym.taskapp import TaskInfo, RolloutRequest, create_task_app
    app = create_task_app(TaskInfo(name="demo", splits={"train": [0, 1]}), my_rollout)
"""

from promptgym.taskapp.client import RolloutFailed, TaskAppClient, TaskAppError
from promptgym.taskapp.environment import TaskAppEnvironment
from promptgym.taskapp.policy import ask_policy, ask_policy_turn
from promptgym.taskapp.program import RemotePolicy, RolloutOutcome, Seed, TaskAppProgram, TaskAppReward, seeds
from promptgym.taskapp.protocol import (
    API_KEY_HEADER,
    Health,
    Policy,
    PolicyModule,
    RolloutRequest,
    RolloutResponse,
    TaskInfo,
    TrajectoryStep,
)
from promptgym.taskapp.server import create_task_app, serve

__all__ = [
    "API_KEY_HEADER", "Health", "Policy", "PolicyModule", "RemotePolicy", "RolloutFailed", "RolloutOutcome",
    "RolloutRequest", "RolloutResponse", "Seed", "TaskAppClient", "TaskAppEnvironment", "TaskAppError",
    "TaskAppProgram", "TaskAppReward", "TaskInfo", "TrajectoryStep", "ask_policy", "ask_policy_turn", "create_task_app", "seeds", "serve",
]
