"""Reward reductions and the function wrapper's synalinks arguments."""

from __future__ import annotations

import pytest

import promptgym as pg
from promptgym.rewards.reduction import apply_masks, reduce_rewards, reduce_values
from tests.support import Answer


def test_reductions_of_a_batch_and_of_nothing():
    assert reduce_values([0.2, 0.9, 0.5], "min") == 0.2
    assert reduce_values([0.5, 0.5, 0.5], "sum") == 1.5
    assert reduce_values([0.0, 1.0], None) == [0.0, 1.0]
    assert reduce_values([], "none") == 0.0
    assert reduce_rewards([0.0, 1.0], "none") == 0.5
    with pytest.raises(ValueError, match="reduction 'median'"):
        reduce_values([1.0], "median")


def test_apply_masks_keeps_missing_samples():
    masked_true, masked_pred = apply_masks([Answer(answer="a"), None], None, out_mask=["answer"])
    assert masked_pred is None
    assert masked_true[0].get_json() == {} and masked_true[1] is None
    assert pg.tree.flatten([masked_true[0], 1]) == [masked_true[0], 1]  # a JSON view is a leaf


def test_wrapper_keeps_fn_arguments_apart_from_its_own():
    async def weighted(y_true, y_pred, weight=1.0):
        return weight

    wrapper = pg.rewards.RewardFunctionWrapper(fn=weighted, name="w", reduction="sum", weight=2.0)
    config = wrapper.get_config()
    assert config["reduction"] == "sum" and config["fn_kwargs"] == {"weight": 2.0} and config["name"] == "w"
    assert "RewardFunctionWrapper" in repr(wrapper)
    assert wrapper._fn_kwargs == {"weight": 2.0}
