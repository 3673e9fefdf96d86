"""OMEGA's parts work without OMEGA: the population's DNS competition and parent selection on hand-made
candidates, the variable credit, and the child writer's guard rails."""

import numpy as np
import pytest

from promptgym.optimizers import kit
from promptgym.optimizers.base import Candidate
from promptgym.optimizers.omega_breeding import ChildWriter, VariableCredit, crossover_examples
from promptgym.optimizers.omega_population import CandidateDistances, Population

# The DNS example of test_dns / test_omega: five candidates, distances by a table over their instructions.
TABLE = {frozenset("ab"): 0.05, frozenset("ac"): 0.6, frozenset("ad"): 0.7, frozenset("ae"): 0.1,
         frozenset("bc"): 0.5, frozenset("bd"): 0.6, frozenset("be"): 0.15, frozenset("cd"): 0.05,
         frozenset("ce"): 0.7, frozenset("de"): 0.7}
FITNESS = dict(zip("abcde", [0.9, 0.8, 0.7, 0.6, 0.5]))


async def tabled(c1, c2, embedding_model=None):
    return TABLE[frozenset(c1["qa/state"]["instructions"] + c2["qa/state"]["instructions"])]


def hand_made() -> list[Candidate]:
    return [Candidate(id=i, variables={"qa/state": {"instructions": text}}) for i, text in enumerate("abcde")]


def fitness(candidate: Candidate) -> float:
    return FITNESS[candidate.variables["qa/state"]["instructions"]]


async def test_dns_competition_on_a_hand_made_population():
    for algorithm, size, survivors in (("dns", 10, "ace"), ("dns", 2, "ac"), ("ga", 2, "ab")):
        candidates, events = hand_made(), []
        population = Population(CandidateDistances(distance_function=tabled), k_nearest_fitter=1, algorithm=algorithm)
        population.ids = [c.id for c in candidates]

        async def emit(event):
            events.append(event)

        await population.compete(candidates, fitness, best=candidates[0], size=size, emit=emit)
        assert "".join("abcde"[i] for i in population.ids) == survivors, (algorithm, size)
        assert events[0].kind == "population_updated"
        assert (max(population.scores.values()) == 1.0) if algorithm == "dns" else population.scores == {}


async def test_embedding_distances_are_cached_per_candidate():
    class Embeddings:
        def __init__(self):
            self.texts: list[str] = []

        async def __call__(self, texts):
            self.texts += texts
            return [[float(len(t)), 1.0] for t in texts]

    model = Embeddings()
    distances = CandidateDistances(embedding_model=model)
    candidates = hand_made()
    first = await distances.matrix(candidates[:3])
    second = await distances.matrix(candidates)
    assert first.shape == (3, 3) and second.shape == (5, 5) and len(model.texts) == 5


def test_parent_selection_and_variable_credit_alone():
    candidates, rng = hand_made(), np.random.default_rng(0)
    assert {Population.select(candidates, fitness, "best", 0.3, rng).id for _ in range(50)} == {0}
    credit = VariableCredit()
    credit.rewards = {"good/state": [10.0, 10.0], "bad/state": [0.0, 10.0]}
    picks = [credit.choose(["good/state", "bad/state"], rng) for _ in range(2000)]
    assert picks.count("bad/state") > picks.count("good/state")


def test_child_writer_guard_rails_and_merged_examples():
    writer = ChildWriter(max_instruction_length=100)
    value = {"instructions": "Answer the question.", "examples": []}
    assert writer.schema_for(value)["properties"]["instructions"]["maxLength"] == 100
    assert writer.problem("qa/state", value, {"instructions": "Answer the question."}, [], []) == "copy of the parent"
    merged = crossover_examples(np.random.default_rng(0), {"examples": [1, 2]}, {"examples": [2, 3]}, most=3)
    assert merged == [1, 2, 3]


def test_the_old_prompt_names_warn_and_still_work() -> None:
    with pytest.warns(DeprecationWarning, match="use TrainablePrompt"):
        assert kit.PromptState is kit.TrainablePrompt
    with pytest.warns(DeprecationWarning, match="use trainable_prompts"):
        assert kit.prompt_states is kit.trainable_prompts
