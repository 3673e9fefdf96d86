import math

import numpy as np
import pytest

from promptgym.optimizers.dns import (
    competition_scores,
    cosine_distance_matrix,
    crossover_probability,
    dns_survivors,
    ga_survivors,
    select_index,
    selection_probabilities,
    variable_probabilities,
)
from promptgym.optimizers.guard_rails import cut_repetition, instruction_problem, repeated_trigram_ratio


def symmetric(n, pairs):
    matrix = np.zeros((n, n))
    for (i, j), value in pairs.items():
        matrix[i, j] = matrix[j, i] = value
    return matrix


# Five candidates, fittest first. 1 and 4 sit next to 0 (redundant), 2 explores elsewhere, 3 sits next to 2.
FITNESS = [0.9, 0.8, 0.7, 0.6, 0.5]
DISTANCES = symmetric(5, {(0, 1): 0.05, (0, 2): 0.6, (0, 3): 0.7, (0, 4): 0.1, (1, 2): 0.5, (1, 3): 0.6,
                          (1, 4): 0.15, (2, 3): 0.05, (2, 4): 0.7, (3, 4): 0.7})


def test_competition_score_is_mean_distance_to_k_nearest_fitter():
    assert competition_scores(FITNESS, DISTANCES, k=1).tolist() == pytest.approx([1.0, 0.05, 0.5, 0.05, 0.1])
    # k=2: mean of the two nearest fitter ones; candidate 1 has a single fitter one.
    assert competition_scores(FITNESS, DISTANCES, k=2).tolist() == pytest.approx(
        [1.0, 0.05, (0.5 + 0.6) / 2, (0.05 + 0.6) / 2, (0.1 + 0.15) / 2])


def test_equal_fitness_does_not_dominate():
    scores = competition_scores([0.9, 0.5, 0.5], symmetric(3, {(0, 1): 0.1, (0, 2): 0.8, (1, 2): 0.01}), k=1)
    assert scores.tolist() == pytest.approx([1.0, 0.1, 0.8])
    assert competition_scores([0.3, 0.3], symmetric(2, {(0, 1): 0.2}), k=5).tolist() == [1.0, 1.0]


def test_dns_keeps_the_novel_candidate_and_drops_the_redundant_one():
    # Scores [1.0, .05, .5, .05, .1], median .1: keep 0, 2, 4; the top 2 are 0 and 2.
    assert dns_survivors(FITNESS, DISTANCES, k=1, population_size=10) == [0, 2, 4]
    assert dns_survivors(FITNESS, DISTANCES, k=1, population_size=2) == [0, 2]
    # Plain GA keeps the two fittest, however similar.
    assert ga_survivors(FITNESS, population_size=2) == [0, 1]


def test_protected_candidate_always_survives():
    assert dns_survivors(FITNESS, DISTANCES, k=1, population_size=2, protected=[1]) == [0, 1]
    assert ga_survivors(FITNESS, population_size=1, protected=[3]) == [3]
    assert dns_survivors([], np.zeros((0, 0)), k=1, population_size=3) == []


def test_dns_validates_its_inputs():
    with pytest.raises(ValueError, match="population_size"):
        dns_survivors(FITNESS, DISTANCES, k=1, population_size=0)
    with pytest.raises(ValueError, match="distances must be"):
        competition_scores([0.1, 0.2], np.zeros((3, 3)), k=1)


def test_cosine_distance_matrix():
    vectors = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [1.0, 0.0]])
    distances = cosine_distance_matrix(vectors)
    assert distances[0, 1] == pytest.approx(1.0)
    assert distances[0, 2] == pytest.approx(2.0)
    assert distances[0, 3] == pytest.approx(0.0)
    assert np.allclose(distances, distances.T) and np.all(np.diag(distances) == 0)


def test_selection_probabilities():
    softmax = selection_probabilities([1.0, 0.0], "softmax", temperature=0.3)
    assert softmax[0] / softmax[1] == pytest.approx(math.exp(1 / 0.3))
    assert selection_probabilities([0.2, 0.8, 0.8], "best", 0.3).tolist() == [0.0, 0.5, 0.5]
    assert selection_probabilities([0.2, 0.8, 0.1, 0.5], "random", 0.3).tolist() == [0.25] * 4
    # A colder softmax is greedier.
    assert selection_probabilities([1.0, 0.5], "softmax", 0.1)[0] > selection_probabilities([1.0, 0.5], "softmax", 1.0)[0]
    with pytest.raises(ValueError, match="unknown selection 'worst'"):
        selection_probabilities([1.0], "worst", 0.3)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        selection_probabilities([1.0], "softmax", 0.0)


def test_select_index_follows_the_probabilities():
    rng = np.random.default_rng(0)
    assert {select_index([0.1, 0.9, 0.3], "best", 0.3, rng) for _ in range(50)} == {1}
    draws = [select_index([1.0, 0.0], "softmax", 1.0, rng) for _ in range(4000)]
    expected = math.exp(1) / (math.exp(1) + 1)
    assert draws.count(0) / len(draws) == pytest.approx(expected, abs=0.03)


def test_variable_probabilities_are_proportional_to_exp_minus_reward():
    probabilities = variable_probabilities([0.0, 1.0, 0.5])
    assert probabilities.sum() == pytest.approx(1.0)
    assert probabilities[0] / probabilities[1] == pytest.approx(math.e)
    assert probabilities[0] / probabilities[2] == pytest.approx(math.exp(0.5))
    assert variable_probabilities([0.4, 0.4]).tolist() == pytest.approx([0.5, 0.5])


def test_crossover_schedule():
    assert crossover_probability(0.02, 0) == 0.0
    assert crossover_probability(0.02, 5) == pytest.approx(0.10)
    assert crossover_probability(0.02, 10) == pytest.approx(0.20)
    assert crossover_probability(0.5, 3) == 1.0


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("Classify the review.", "copy of the parent"),
    ("  classify the   REVIEW. ", "copy of the parent"),
    ("positive", "label-only"),
    ("Positive.", "label-only"),
    ('{"label": "positive"}', "label-only"),
    ("Read the review carefully. " * 40, "too long"),
    ("Read the review carefully and decide.\nRead the review carefully and decide.", "repeated line"),
    ("think about the words and the tone think about the words and the tone think about the words", "repetitive"),
    ("An old idea we tried already.", "copy of an earlier candidate"),
    # What the 1.5B package model wrote as OMEGA mutations on the dates bench (docs/benchmarks.md).
    ("To fix this issue, we need to modify the current value of the variable to handle the full date format.",
     "discusses the fix"),
    ("To fix the wrong predictions related to dates, we need to ensure that the program can parse dates.",
     "discusses the fix"),
    ("We need to use regular expressions to extract the date.", "discusses the fix"),
    ("Classify the reviews!", "copy of the parent, reworded"),
    ("The problem is that the model reads the day as the month.", "discusses the fix"),
    ("Modify the current value so that it correctly handles cases with missing dates.", "discusses the fix"),
    ("Modify the 'generator/state' variable so that it checks if the predicted date exists.", "discusses the fix"),
    ("Update the generator/state variable to handle dates in a consistent manner.", "discusses the fix"),
])
def test_guard_rails_reject_degenerate_instructions(text, reason):
    problem = instruction_problem(text, parent="Classify the review.", labels={"positive", "negative"},
                                  max_length=300, known=["An old idea we tried already."])
    assert problem is not None and problem.startswith(reason), problem


def test_a_rewording_of_the_parent_is_a_copy():
    # What the 0.5B package model wrote as a grounded OMEGA rewrite of the default instructions (bench, dates).
    parent = "Read the input and answer with the output fields."
    problem = instruction_problem("Read the input and answer with the expected outputs fields.", parent=parent)
    assert problem is not None and problem.startswith("copy of the parent, reworded")
    assert instruction_problem("Read the input and answer with the output fields in DD.MM.YYYY.", parent=parent) is None
    assert instruction_problem("Answer with the output fields.", parent=parent) is None  # a real cut


@pytest.mark.parametrize("text", [
    "Decide whether the review is positive or negative; sarcasm and negations flip the meaning.",
    "To solve the task, read the review and decide whether it is positive or negative.",
    "The review is positive when the author would recommend the product; answer positive or negative.",
    "Classify the review as positive or negative.",
    "Classify the tone of the review.",
    "Change the date to the ISO format before answering.",
])
def test_guard_rails_accept_a_real_rewrite(text):
    assert instruction_problem(text, parent="Classify the review.", labels={"positive", "negative"}) is None
    assert repeated_trigram_ratio(text) == 0.0


@pytest.mark.parametrize(("text", "kept"), [
    ("Write dates as DD.MM.YYYY. Be exact. Be exact. Be exact.", "Write dates as DD.MM.YYYY. Be exact."),
    ("Give the date as DD.MM.YYYY. Give the date as DD.MM", "Give the date as DD.MM.YYYY."),  # cut-off repeat
    ("Answer with the date\nBe brief\nAnswer with the date\n", "Answer with the date\nBe brief"),
    ("No repetition here. None at all.", "No repetition here. None at all."),
    (None, None),
])
def test_cut_repetition_keeps_the_part_before_the_loop(text, kept):
    assert cut_repetition(text) == kept
    if isinstance(kept, str) and kept != text:
        assert instruction_problem(text) is not None and instruction_problem(kept) is None
