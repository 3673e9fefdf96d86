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


async def test_a_metric_given_to_two_programs_is_cloned_for_each():
    from tests.support import echo_lm, functional_program

    shared, cost = pg.metrics.Mean(name="m"), pg.metrics.Cost()
    first, second = await functional_program(echo_lm(), "one"), await functional_program(echo_lm(), "two")
    for program in (first, second):
        program.compile(reward=pg.rewards.ExactMatch(), metrics=[shared, cost])
    mine, theirs = first.metrics, second.metrics
    assert shared not in mine and mine[0] is not theirs[0] and mine[0].name == "m"
    assert mine[1].program is first and theirs[1].program is second and cost.program is None
    await mine[0].update_state(Answer(answer="a"), Answer(answer="a"))
    assert mine[0].result() == 1.0 and theirs[0].result() == 0.0
    assert first.compiled and list(first._compile_metrics._user_metrics) == mine
    assert [module.name for module in first._flatten_modules()][0] == "one"


@pytest.mark.parametrize("cls,build,saved", [(CompileMetrics, lambda: CompileMetrics([]), "the metrics themselves"),
                                             (CompileReward, lambda: CompileReward(None), "the reward itself")])
def test_compiled_setup_is_not_serialized_but_says_what_to_save(cls, build, saved):
    message = f"{cls.__name__} is rebuilt by compile\\(\\); save {saved}"
    with pytest.raises(NotImplementedError, match=message):
        build().get_config()
    with pytest.raises(NotImplementedError, match=message):
        cls.from_config({})
