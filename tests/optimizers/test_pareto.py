"""Pareto-front parent selection, dominance, acceptance and merge on hand-made score tables."""

from __future__ import annotations

import numpy as np
import pytest

from promptgym.optimizers import pareto


def test_best_sets_keep_ties_and_skip_unscored():
    table = {0: {"0": 1.0, "1": 0.5}, 1: {"0": 1.0, "1": 0.0, "2": 0.3}}
    assert pareto.best_sets(table) == {"0": {0, 1}, "1": {0}, "2": {1}}


def test_frequencies_count_examples_won_by_nondominated_candidates():
    # 0 wins e0; 1 wins e1 and e2; 2 wins nothing alone (ties with 1 on e2) -> dominated by 1.
    table = {
        0: {"0": 1.0, "1": 0.0, "2": 0.0},
        1: {"0": 0.0, "1": 1.0, "2": 1.0},
        2: {"0": 0.0, "1": 0.0, "2": 1.0},
    }
    assert pareto.nondominated(pareto.best_sets(table), table) == {0, 1}
    assert pareto.frequencies(table) == {0: 1, 1: 2}


def test_candidate_best_only_through_ties_is_dominated_but_a_unique_win_keeps_it():
    table = {0: {"0": 1.0, "1": 1.0}, 1: {"0": 1.0, "1": 0.0}, 2: {"0": 0.0, "1": 0.0, "2": 0.5}}
    assert pareto.frequencies(table) == {0: 2, 2: 1}


def test_select_parent_samples_in_proportion_to_wins():
    table = {
        0: {"0": 1.0, "1": 0.0, "2": 0.0, "3": 0.0},
        1: {"0": 0.0, "1": 1.0, "2": 1.0, "3": 1.0},
        2: {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0},
    }
    rng = np.random.default_rng(0)
    draws = [pareto.select_parent(table, rng) for _ in range(4000)]
    assert set(draws) == {0, 1}
    assert draws.count(0) / len(draws) == pytest.approx(0.25, abs=0.03)


def test_select_parent_is_reproducible_for_a_seed():
    table = {0: {"0": 1.0, "1": 0.0}, 1: {"0": 0.0, "1": 1.0}}
    a = [pareto.select_parent(table, np.random.default_rng(7)) for _ in range(5)]
    b = [pareto.select_parent(table, np.random.default_rng(7)) for _ in range(5)]
    assert a == b


def test_select_parent_when_everyone_scores_zero_and_empty_table():
    table = {0: {"0": 0.0}, 1: {"0": 0.0}}
    assert pareto.select_parent(table, np.random.default_rng(0)) in (0, 1)
    with pytest.raises(ValueError):
        pareto.select_parent({}, np.random.default_rng(0))


def test_select_best_prefers_mean_then_earliest():
    assert pareto.select_best({0: {"0": 0.5}, 1: {"0": 1.0}, 2: {"0": 1.0}}) == 1


@pytest.mark.parametrize(("child", "parent", "accepted"), [
    ([1, 1, 0], [1, 0, 0], True),
    ([1, 0, 0], [1, 0, 0], False),   # equal is not an improvement
    ([0, 0, 0], [1, 0, 0], False),
])
def test_acceptance_rule_is_strict_improvement_on_the_same_minibatch(child, parent, accepted):
    assert pareto.is_improvement(child, parent) is accepted


def test_common_ancestor_and_merge_components():
    parents = {0: None, 1: 0, 2: 0, 3: 1}
    assert pareto.common_ancestor(parents, 3, 2) == 0
    assert pareto.common_ancestor(parents, 3, 1) is None  # 1 is 3's ancestor
    ancestor = {"a:instructions": "A0", "b:instructions": "B0"}
    left = {"a:instructions": "A1", "b:instructions": "B0"}
    right = {"a:instructions": "A0", "b:instructions": "B2"}
    assert pareto.merge_components(ancestor, left, right, 0.5, 0.4) == {"a:instructions": "A1", "b:instructions": "B2"}
    both = {"a:instructions": "A2", "b:instructions": "B0"}
    assert pareto.merge_components(ancestor, left, both, 0.5, 0.4) is None  # takes the better side: equals left
