"""Reinforcement learning on a CPU: GRPO with LoRA against a task, the policy served on an OpenAI-compatible URL.

    from promptgym.finetune.rl import RLJob, RLSettings
    job = RLJob.prepare(RLSettings(base_model="local/smollm2-135m-instruct", iterations=30))
    result = await job.run(environment, "runs/acronyms-rl")    # promptgym.taskapp.TaskAppEnvironment, or your own
    result.final_status()    # {"status", "final_reward", "eval_reward_before", "eval_reward_after", "model_id", ...}

Importing this package is cheap: torch, transformers and peft load when a job starts. docs/rl.md has the details.
"""

from __future__ import annotations

import importlib
from typing import Any

from promptgym.finetune.rl.environment import Environment, Episode
from promptgym.finetune.rl.settings import RLSettings

_LAZY = {
    "RLJob": "promptgym.finetune.rl.grpo",
    "RLResult": "promptgym.finetune.rl.grpo",
    "RLAborted": "promptgym.finetune.rl.grpo",
    "PolicyNeverCalled": "promptgym.finetune.rl.rollouts",
    "SeedSplits": "promptgym.finetune.rl.grpo",
    "PolicyServer": "promptgym.finetune.rl.policy_server",
    "group_advantages": "promptgym.finetune.rl.advantages",
}

__all__ = ["Environment", "Episode", "RLSettings", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'promptgym.finetune.rl' has no attribute {name!r}")
