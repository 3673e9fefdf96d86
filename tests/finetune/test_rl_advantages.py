"""Group advantages (numbers by hand), zero-signal groups, failed rollouts, the seeds of each iteration."""

from __future__ import annotations

import math

import pytest

from promptgym.finetune.rl.advantages import EPSILON, group_advantages, group_spread
from promptgym.finetune.rl.policy_server import Completion
from promptgym.finetune.rl.rollouts import RolloutResult, evaluation_reward, iteration_tasks, training_rows


def test_advantages_are_rewards_normalised_within_the_group() -> None:
    # mean 0.5, sample std sqrt(0.5 / 3) = 0.408248...
    advantages = group_advantages([1.0, 0.0, 0.5, 0.5])
    std = math.sqrt(0.5 / 3)
    assert advantages == pytest.approx([0.5 / (std + EPSILON), -0.5 / (std + EPSILON), 0.0, 0.0])
    assert advantages[0] == pytest.approx(1.2244, abs=1e-4)
    assert group_advantages([3.0, 1.0], scale=False) == [1.0, -1.0]
    assert group_spread([3.0, 1.0]) == pytest.approx(math.sqrt(2))


@pytest.mark.parametrize("rewards", [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0], [0.25], []])
def test_a_group_of_equal_rewards_has_no_signal(rewards: list[float]) -> None:
    assert group_advantages(rewards) is None


def result(seed: int, reward: float | None, tokens: list[int], error: str | None = None) -> RolloutResult:
    completions = [Completion([1, 2], tokens, [-0.5] * len(tokens), "stop", "x")] if tokens else []
    return RolloutResult(seed, "train", reward, completions, error)


def test_training_rows_skip_zero_signal_groups_and_failed_rollouts() -> None:
    groups = [
        [result(0, 1.0, [5]), result(0, 0.0, [6, 7]), result(0, None, [], "RolloutFailed: HTTP 500")],  # signal
        [result(1, 0.3, [8]), result(1, 0.3, [9])],  # no signal: left out
    ]
    rows, stats = training_rows(groups, scale=True)
    assert [row.completion_ids for row in rows] == [[5], [6, 7]]
    # the failed rollout is out of its group: advantages over [1.0, 0.0] alone
    assert [row.advantage for row in rows] == pytest.approx([0.5 / (math.sqrt(0.5) + EPSILON), -0.5 / (math.sqrt(0.5) + EPSILON)])
    assert (stats.groups, stats.zero_signal_groups, stats.failed_rollouts, stats.completion_tokens) == (2, 1, 1, 5)
    assert stats.mean_reward == pytest.approx((1.0 + 0.0 + 0.3 + 0.3) / 4)
    assert stats.reward_spread == pytest.approx((math.sqrt(0.5) + 0.0) / 2)


def test_each_iteration_rolls_out_batch_size_seeds_group_size_times_and_covers_every_seed_per_epoch() -> None:
    seeds = [10, 11, 12, 13, 14, 15]
    first = iteration_tasks(seeds, batch_size=2, group_size=3, seed=0, iteration=0)
    assert len(first) == 6 and first[0] == first[1] == first[2] and first[3] == first[4] == first[5]
    epoch = [task[0] for iteration in range(3) for task in iteration_tasks(seeds, 2, 1, 0, iteration)]
    assert sorted(epoch) == seeds  # an epoch visits each seed once
    assert iteration_tasks(seeds, 2, 3, 0, 4) == iteration_tasks(seeds, 2, 3, 0, 4)  # a resumed run gets the same
    assert {task[1] for task in first} == {"train"}


def test_evaluation_scores_a_failed_rollout_zero() -> None:
    assert evaluation_reward([result(0, 1.0, [1]), result(1, None, [], "timeout")]) == (0.5, 1)
    assert evaluation_reward([]) == (None, 0)
