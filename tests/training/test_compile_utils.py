"""Per-output compiled rewards and metrics (synalinks' compile_utils)."""

from __future__ import annotations

import pytest

import promptgym as pg
from promptgym.training.compile_utils import CompileMetrics, CompileReward
from tests.support import Answer


async def test_rewards_per_output_are_weighted_and_summed():
    reward = CompileReward(reward={"a": pg.rewards.ExactMatch(), "b": pg.rewards.ExactMatch()},
                           reward_weights={"a": 1.0, "b": 2.0}, output_names=["a", "b"])
    y_true = {"a": Answer(answer="x"), "b": Answer(answer="y")}
    assert await reward(y_true, {"a": Answer(answer="x"), "b": Answer(answer="y")}) == 3.0
    assert await reward(y_true, {"a": Answer(answer="x"), "b": Answer(answer="no")}) == 1.0
    assert [metric.name for metric in reward.metrics] == ["a_reward", "b_reward"]
    with pytest.raises(ValueError, match="reward_weights"):
        CompileReward(reward=pg.rewards.ExactMatch(), reward_weights="heavy")


async def test_metrics_by_output_and_batch_metrics_see_the_batch():
    metrics = CompileMetrics(metrics=[pg.metrics.PassAtK(k=1), pg.metrics.Mean(name="mean")])
    with pytest.raises(ValueError, match="not yet been built"):
        metrics.result()
    y_true = [Answer(answer="a")] * 4
    y_pred = [Answer(answer="a")] + [Answer(answer="b")] * 3
    await metrics.update_state_batch(y_true, y_pred)
    assert metrics.result()["pass_at_k"] == pytest.approx(0.25)
    per_output = CompileMetrics(metrics={"a": [pg.metrics.Mean(name="m")]}, output_names=["a", "b"])
    per_output.build(y_true=[None, None], y_pred=[None, None])
    assert list(per_output.result()) == ["a_m"]
