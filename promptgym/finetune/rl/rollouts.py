"""Running episodes against the policy server: one URL per attempt, the completions of the attempt that counted.

    results = await run_rollouts(environment, server, [(seed, "train")] * 4, greedy=False)
    groups = group_results(results, group_size=4)
    rows, stats = training_rows(groups, scale=True)

A rollout that raises (the task app failed after its retries, timed out, answered nonsense) or whose reward
is not a finite number is a result with ``error`` set and no reward: training leaves it out of its group,
evaluation scores it 0.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Sequence

from promptgym.finetune.batches import epoch_order
from promptgym.finetune.rl.advantages import group_advantages, group_spread
from promptgym.finetune.rl.environment import Environment
from promptgym.finetune.rl.policy_server import Completion, PolicyServer
from promptgym.finetune.rl.update import TrainingRow


@dataclass
class RolloutResult:
    seed: int
    split: str
    reward: float | None
    completions: list[Completion] = field(default_factory=list)
    error: str | None = None

    @property
    def tokens(self) -> int:
        return sum(completion.tokens for completion in self.completions)


async def run_rollout(environment: Environment, server: PolicyServer, seed: int, split: str, greedy: bool,
                      key: tuple[int, ...] | None = None) -> RolloutResult:
    """One episode; each attempt gets a fresh policy URL, and only the last attempt's completions are kept.

    ``key`` (iteration, rollout index) keys the attempt's sampling (with the attempt's number appended).
    """
    current: list[str] = []
    attempts = 0

    def policy_url() -> str:
        nonlocal attempts
        if current:
            server.close_rollout(current.pop())
        current.append(server.open_rollout(greedy=greedy, key=None if key is None else (*key, attempts)))
        attempts += 1
        return server.url(current[-1])

    try:
        episode = await environment.episode(seed, split, policy_url)
    except asyncio.CancelledError:
        if current:
            server.close_rollout(current.pop())
        raise
    except Exception as error:  # noqa: BLE001 - a failed rollout is a result, never a crash
        if current:
            server.close_rollout(current.pop())
        return RolloutResult(seed, split, None, error=f"{type(error).__name__}: {error}")
    finally:
        if key is not None:
            server.settle(key)
    completions = server.close_rollout(current.pop()) if current else []
    reward = episode.reward
    if not isinstance(reward, (int, float)) or not math.isfinite(reward):
        return RolloutResult(seed, split, None, completions, error=f"the reward is not a finite number: {reward!r}")
    return RolloutResult(seed, split, float(reward), completions)


async def run_rollouts(environment: Environment, server: PolicyServer, tasks: Sequence[tuple[int, str]],
                       greedy: bool, iteration: int = 0) -> list[RolloutResult]:
    """All ``(seed, split)`` episodes at once (the server batches their policy calls), results in order.

    Rollout ``i`` of iteration ``iteration`` samples from the stream keyed (run seed, iteration, i, attempt,
    request), whatever order its requests reach the server in: a seeded run is reproducible.
    """
    keys = [(iteration, index) for index in range(len(tasks))]
    server.expect(keys)  # batches wait for every one of them: the same batches in every run
    try:
        return list(await asyncio.gather(*(run_rollout(environment, server, seed, split, greedy, key=key)
                                           for key, (seed, split) in zip(keys, tasks))))
    finally:
        server.expect([])


class PolicyNeverCalled(RuntimeError):
    """Rollouts returned rewards but the task app never asked the policy server for a completion."""


def check_policy_called(results: Sequence[RolloutResult], where: str) -> None:
    """Raise PolicyNeverCalled when rewards came back and not one completion was served: nothing was sampled,
    so training would 'complete' on nothing and register an untrained model."""
    rewarded = [result for result in results if result.reward is not None]
    if rewarded and not any(result.completions for result in results):
        raise PolicyNeverCalled(
            f"{where}: {len(rewarded)} rollout(s) returned a reward but the task app never called "
            "policy.inference_url (the policy server served no completion), so there is nothing to train on; "
            "the app must ask the policy at request.policy.inference_url (promptgym.taskapp.ask_policy)")


@dataclass
class GroupStats:
    """What an iteration's groups gave: rewards, spread, how many carried no signal, failures, tokens."""

    mean_reward: float | None
    reward_spread: float
    groups: int
    zero_signal_groups: int
    failed_rollouts: int
    completion_tokens: int


def group_results(results: Sequence[RolloutResult], group_size: int) -> list[list[RolloutResult]]:
    """Consecutive ``group_size`` results form a seed's group (the order :func:`iteration_tasks` makes)."""
    return [list(results[start:start + group_size]) for start in range(0, len(results), group_size)]


def training_rows(groups: Sequence[Sequence[RolloutResult]], scale: bool) -> tuple[list[TrainingRow], GroupStats]:
    """Every completion of every group with signal, with its rollout's advantage; and the iteration's numbers."""
    rows: list[TrainingRow] = []
    rewards, spreads, zero_signal, failed, tokens = [], [], 0, 0, 0
    for group in groups:
        finished = [result for result in group if result.reward is not None]
        failed += len(group) - len(finished)
        tokens += sum(result.tokens for result in group)
        group_rewards = [result.reward for result in finished]
        rewards += group_rewards
        spreads.append(group_spread(group_rewards))  # type: ignore[arg-type]
        advantages = group_advantages(group_rewards, scale=scale)  # type: ignore[arg-type]
        if advantages is None:
            zero_signal += 1
            continue
        for result, advantage in zip(finished, advantages):
            rows += [TrainingRow(c.prompt_ids, c.completion_ids, c.logprobs, advantage)
                     for c in result.completions if c.completion_ids]
    stats = GroupStats(mean_reward=sum(rewards) / len(rewards) if rewards else None,
                       reward_spread=sum(spreads) / len(spreads) if spreads else 0.0, groups=len(groups),
                       zero_signal_groups=zero_signal, failed_rollouts=failed, completion_tokens=tokens)
    return rows, stats


def iteration_tasks(train_seeds: Sequence[int], batch_size: int, group_size: int, seed: int,
                    iteration: int) -> list[tuple[int, str]]:
    """The rollouts of iteration ``iteration`` (0-based): ``batch_size`` seeds, each ``group_size`` times in a row.

    Seeds are taken in a shuffled order, epoch after epoch; the order is a function of (seed, epoch) alone, so
    a resumed run rolls out the same seeds an uninterrupted one would.
    """
    count = len(train_seeds)
    chosen = []
    for position in range(iteration * batch_size, (iteration + 1) * batch_size):
        epoch, offset = divmod(position, count)
        chosen.append(train_seeds[epoch_order(count, seed, epoch)[offset]])
    return [(value, "train") for value in chosen for _ in range(group_size)]


def evaluation_reward(results: Sequence[RolloutResult]) -> tuple[float | None, int]:
    """(mean reward with failures scored 0, failures)."""
    if not results:
        return None, 0
    failures = sum(1 for result in results if result.reward is None)
    return sum(result.reward or 0.0 for result in results) / len(results), failures
