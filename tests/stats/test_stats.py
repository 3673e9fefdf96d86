"""Confidence intervals, paired tests and the Evaluation dict."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest

from promptgym.stats import Evaluation, confidence_interval, mcnemar_exact_p, paired_test


def test_graded_scores_get_a_seeded_bootstrap_interval():
    scores = np.random.default_rng(0).uniform(0, 1, 40)
    first, again, other = confidence_interval(scores), confidence_interval(scores), confidence_interval(scores, seed=1)
    assert first.method == "bootstrap" and first == again and other != first
    assert first.mean == pytest.approx(scores.mean()) and first.n == 40
    assert first.low < first.mean < first.high
    # the normal approximation's 95% half-width: 1.96 * std / sqrt(n)
    assert first.half_width == pytest.approx(1.96 * scores.std() / np.sqrt(40), rel=0.15)


def test_binary_scores_get_wilson_intervals_that_stay_honest_at_the_extremes():
    perfect, nothing = confidence_interval([1] * 10), confidence_interval([0] * 10)
    assert perfect.method == nothing.method == "wilson"
    assert (perfect.low, perfect.high) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert (nothing.low, nothing.high) == (0.0, pytest.approx(0.2775, abs=1e-4))
    three_quarters = confidence_interval([1] * 30 + [0] * 10)
    assert (three_quarters.low, three_quarters.high) == (pytest.approx(0.5981, abs=1e-3), pytest.approx(0.8581, abs=1e-3))


def test_interval_narrows_with_more_examples():
    small = confidence_interval([1, 0] * 10)
    large = confidence_interval([1, 0] * 200)
    assert large.half_width < small.half_width / 3


def test_failed_examples_count_zero_and_bad_input_is_named():
    assert confidence_interval([1, None, 1, None]).mean == 0.5
    with pytest.raises(ValueError, match="at least one example"):
        confidence_interval([])
    with pytest.raises(ValueError, match="NaN.*example 1"):
        confidence_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="level"):
        confidence_interval([1, 0], level=95)


def test_mcnemar_exact_matches_the_binomial_tail():
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(9, 1) == pytest.approx(2 * 11 / 1024)
    assert mcnemar_exact_p(1, 9) == mcnemar_exact_p(9, 1)
    assert mcnemar_exact_p(5, 5) == 1.0
    assert mcnemar_exact_p(6, 0) == pytest.approx(2 / 64)


def test_paired_test_on_binary_scores_uses_mcnemar():
    before = [0] * 10 + [1] * 30
    one_better = [1] + [0] * 9 + [1] * 30
    test = paired_test(before, one_better)
    assert (test.method, test.wins, test.losses, test.n) == ("mcnemar-exact", 1, 0, 40)
    assert test.p_value == 1.0 and not test.significant and test.verdict() == "within noise"
    assert test.low < 0 < test.high
    clearly = paired_test(before, [1] * 40)
    assert clearly.significant and clearly.verdict() == "better" and clearly.low > 0
    assert paired_test([1] * 40, before).verdict() == "worse"


def test_paired_interval_on_a_few_examples_is_wide_not_certain():
    three = paired_test([0, 0, 0], [1, 1, 1])
    assert three.difference == 1.0 and three.high == 1.0
    assert three.low < 0.5 and not three.significant and three.p_value == 0.25
    unchanged = paired_test([1, 0] * 20, [1, 0] * 20)
    assert unchanged.difference == 0 and unchanged.low < 0 < unchanged.high and unchanged.p_value == 1.0


def test_paired_test_on_graded_scores_uses_the_bootstrap():
    rng = np.random.default_rng(0)
    before = rng.uniform(0, 1, 60)
    same = paired_test(before, before + rng.normal(0, 0.01, 60))
    shifted = paired_test(before, before + 0.2)
    assert same.method == shifted.method == "paired-bootstrap"
    assert shifted.p_value < 0.01 and shifted.low == pytest.approx(0.2)
    assert same.p_value > 0.05 or abs(same.difference) < 0.01


def test_paired_test_needs_the_same_examples():
    with pytest.raises(ValueError, match="same examples: 2 scores before, 3 after"):
        paired_test([1, 0], [1, 0, 1])


def test_evaluation_is_the_plain_dict_with_scores_attached():
    result = Evaluation({"reward": [1, 0, 1, None], "f1_score": [1, 0.5, 1, 0]}, extra={"lm_calls": 4})
    assert result == {"reward": 0.5, "f1_score": 0.625, "lm_calls": 4}
    assert json.loads(json.dumps(result)) == dict(result)
    assert result.n == 4 and result.scores["reward"] == (1.0, 0.0, 1.0, 0.0)
    assert result.interval().mean == 0.5 and result.interval("f1_score").mean == 0.625
    restored = pickle.loads(pickle.dumps(result))
    assert restored == result and restored.scores == result.scores
    assert copy.deepcopy(result).interval() == result.interval()


def test_evaluation_compare_and_round_trip_through_json():
    before = Evaluation({"reward": [0, 0, 1, 0, 1, 0]})
    after = Evaluation({"reward": [1, 1, 1, 0, 1, 1]})
    test = after.compare(before)
    assert (test.wins, test.losses, test.difference) == (3, 0, pytest.approx(0.5))
    again = Evaluation.from_statistics(json.loads(json.dumps(after)), json.loads(json.dumps(after.statistics())))
    assert again.compare(before) == test
    with pytest.raises(TypeError, match="baseline's Evaluation"):
        after.compare({"reward": 0.3})


def test_an_empty_evaluation_has_no_interval():
    empty = Evaluation({"reward": []})
    assert empty == {"reward": None} and empty.intervals() == {} and "no examples" in empty.describe()
