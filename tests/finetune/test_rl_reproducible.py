"""A seeded RL run is reproducible although its requests reach the policy server in a different order each time,
and a task app that never calls the policy is an error, not a 'completed' run (issue 27, items 3 and 4)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from promptgym.core.events import Event, RLIteration
from promptgym.finetune.checkpoint import last_checkpoint, read_adapter
from promptgym.finetune.rl import Episode, RLJob, RLSettings
from promptgym.finetune.rl.rollouts import PolicyNeverCalled
from promptgym.finetune.settings import LoraSettings

JITTER = random.SystemRandom()
"""Unseeded on purpose: every run sends its requests in another order."""


def letters_score(text: str) -> float:
    return sum(1 for char in text if "a" <= char <= "m") / max(1, len(text))


class JitteryEnvironment:
    """Each episode waits a random moment, then asks the policy twice in a row; the reward is its letters' share."""

    name = "jittery"
    splits = {"train": list(range(6)), "test": [100, 101]}

    async def episode(self, seed: int, split: str, policy_url: Callable[[], str]) -> Episode:
        url = policy_url()
        texts = []
        async with httpx.AsyncClient(timeout=60) as client:
            for turn in range(2):
                await asyncio.sleep(JITTER.uniform(0.0, 0.06))
                answer = await client.post(f"{url}/chat/completions", json={
                    "messages": [{"role": "user", "content": f"seed {seed} turn {turn}"}], "max_tokens": 5})
                texts.append(answer.json()["choices"][0]["message"]["content"])
        return Episode(reward=letters_score("".join(texts)))


class NeverCallsPolicy:
    """A task app that computes a reward without ever asking the policy (a broken app, or a prompt-only one)."""

    name = "no-policy"
    splits = {"train": [0, 1, 2, 3], "test": [10]}

    async def episode(self, seed: int, split: str, policy_url: Callable[[], str]) -> Episode:
        return Episode(reward=float(seed % 2))


def rl_settings(tiny_model: Path, **changes: Any) -> RLSettings:
    values = dict(base_model=str(tiny_model), iterations=3, batch_size=3, group_size=3, max_new_tokens=5,
                  learning_rate=0.05, temperature=1.0, eval_every=0, save_steps=3, seed=11,
                  lora=LoraSettings(r=4, alpha=8, dropout=0.1))
    return RLSettings(**{**values, **changes})


async def train(tiny_model: Path, folder: Path) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    events: list[Event] = []
    job = RLJob.prepare(rl_settings(tiny_model), name="repro")
    await job.run(JitteryEnvironment(), folder, on_event=events.append)
    rewards = [(e.iteration, e.mean_reward, e.reward_spread, e.completion_tokens, e.loss)
               for e in events if isinstance(e, RLIteration)]
    return rewards, read_adapter(last_checkpoint(folder / "checkpoints"))


async def test_two_runs_with_one_seed_give_the_same_rewards_and_weights(tiny_model: Path, tmp_path: Path,
                                                                        fake_export) -> None:
    first_rewards, first_weights = await train(tiny_model, tmp_path / "first")
    second_rewards, second_weights = await train(tiny_model, tmp_path / "second")
    assert len(first_rewards) == 3 and any(row[4] is not None for row in first_rewards)  # something was trained
    assert first_rewards == second_rewards
    assert first_weights.keys() == second_weights.keys()
    changed = [name for name in first_weights if "lora_B" in name and float(first_weights[name].abs().max()) > 0]
    assert changed, "the adapter never moved: the comparison would prove nothing"
    for name, tensor in first_weights.items():
        assert tensor.equal(second_weights[name]), name


async def test_an_app_that_never_calls_the_policy_is_an_error_naming_the_cause(tiny_model: Path, tmp_path: Path) -> None:
    job = RLJob.prepare(rl_settings(tiny_model, batch_size=2, group_size=2), name="nopolicy")
    with pytest.raises(PolicyNeverCalled, match=r"never called policy\.inference_url"):
        await job.run(NeverCallsPolicy(), tmp_path / "run")
