"""synalinks' variable-level optimizer hooks (optimizers.variable_population): each variable's population in its
Trainable fields, updated in place; OMEGA's mutation and crossover writers on the scripted LM."""

from __future__ import annotations

import json

import pytest

import promptgym as pg
from promptgym.core.json_data_model import JsonDataModel
from promptgym.optimizers.base import Optimizer
from promptgym.optimizers.omega_population import leaf_texts, similarity_distance
from promptgym.optimizers.omega_prompts import crossover_instructions, mutation_instructions
from promptgym.testing import ScriptedLanguageModel

FIELDS = ("seed_candidates", "candidates", "best_candidates", "history", "current_predictions", "predictions")


def variable(name: str = "v", **values) -> JsonDataModel:
    payload = {**{key: [] for key in FIELDS}, "nb_visit": 0, "cumulative_reward": 0.0, "instructions": "start",
               **values}
    model = JsonDataModel(json=payload, schema={"type": "object", "properties": {key: {} for key in payload}})
    model.name = name
    return model


async def test_the_epoch_end_keeps_the_fittest_takes_the_best_and_records_a_changed_best_once() -> None:
    optimizer = Optimizer(population_size=2)
    var = variable(candidates=[{"instructions": "a", "reward": 0.4}, {"instructions": "b", "reward": 0.9}],
                   best_candidates=[{"instructions": "c", "reward": 0.6}])
    await optimizer.on_epoch_end(0, [var])
    assert [c["instructions"] for c in var.get("best_candidates")] == ["b", "c"]
    assert var.get("instructions") == "b" and var.get("history") == [{"instructions": "b"}]
    await optimizer.on_epoch_end(1, [var])  # the same best: no second history entry
    assert var.get("history") == [{"instructions": "b"}]


async def test_the_batch_signal_is_this_batchs_and_a_pass_without_predictions_leaves_it() -> None:
    optimizer = Optimizer()
    var = variable(current_predictions=[{"reward": None}, {"reward": None}])
    await optimizer.assign_reward_to_predictions([var], rewards=[1.0, 0.0])
    assert (var.get("nb_visit"), var.get("cumulative_reward"), len(var.get("predictions"))) == (2, 1.0, 2)
    await optimizer.assign_reward_to_predictions([var], rewards=[0.5])  # a validation pass: nothing current
    assert (var.get("nb_visit"), var.get("cumulative_reward")) == (2, 1.0)


async def test_a_batch_starts_from_a_seed_then_from_a_best_and_ends_on_the_best() -> None:
    optimizer = Optimizer(seed=0)
    var = variable(seed_candidates=[{"instructions": "seed"}], nb_visit=3, cumulative_reward=2.0)
    await optimizer.on_batch_begin(0, 0, [var])
    assert var.get("instructions") == "seed" and var.get("nb_visit") == 0
    var.update({"best_candidates": [{"instructions": "best", "reward": 1.0}]})
    await optimizer.on_batch_begin(1, 1, [var])
    assert var.get("instructions") == "best"
    await optimizer.maybe_add_candidate(1, var, new_candidate={"instructions": "new"}, reward=2.0)
    await optimizer.maybe_add_candidate(1, var, new_candidate={"instructions": "new"}, reward=3.0)  # known: kept once
    assert [c["reward"] for c in var.get("candidates")] == [2.0]
    await optimizer.on_batch_end(1, 1, [var])
    assert var.get("instructions") == "new"


async def test_an_evolutionary_optimizer_starts_a_batch_from_the_parent_its_selection_draws() -> None:
    optimizer = pg.optimizers.EvolutionaryOptimizer(selection="best")
    var = variable(best_candidates=[{"instructions": "low", "reward": 0.3}, {"instructions": "high", "reward": 0.9}])
    for step in range(3):
        await optimizer.on_batch_begin(step, 1, [var])
        assert var.get("instructions") == "high"


async def test_the_variable_that_struggled_is_the_one_chosen() -> None:
    optimizer = Optimizer(sampling_temperature=0.01, seed=0)
    good, bad = variable("good", nb_visit=2, cumulative_reward=2.0), variable("bad", nb_visit=2, cumulative_reward=0.0)
    assert {await optimizer.select_variable_name_to_update([good, bad]) for _ in range(5)} == {"bad"}


def test_the_base_checks_synalinks_arguments() -> None:
    with pytest.raises(ValueError, match="population_size must be an integer >= 1"):
        Optimizer(population_size=0)
    with pytest.raises(ValueError, match="sampling_temperature must be > 0"):
        Optimizer(sampling_temperature=0)


async def test_omega_mutates_a_variable_with_its_model_and_a_failed_call_keeps_the_value() -> None:
    seen = []

    def respond(request):
        seen.append(request.messages[0]["content"])
        return {"thinking": "be brief", "instructions": "Answer in one word."}

    omega = pg.optimizers.OMEGA(language_model=ScriptedLanguageModel(respond=respond), algorithm="ga")
    omega.set_program(type("P", (), {"description": "capitals"})())
    var = variable(seed_candidates=[{"instructions": "start"}])
    await omega.propose_new_candidates(0, [var], x=[{"q": "France?"}], y=[{"a": "Paris"}], y_pred=[{"a": "?"}])
    assert var.get("instructions") == "Answer in one word."
    assert "optimization" in seen[0] and "Include all specified keys: ['instructions']" in seen[0]

    def fail(request):
        raise RuntimeError("timeout")

    broken = pg.optimizers.OMEGA(language_model=ScriptedLanguageModel(respond=fail), algorithm="ga")
    with pytest.warns(UserWarning, match="OMEGA mutation at step 3 failed"):
        assert await broken.mutate_candidate(3, var, {"instructions": "start"}, x=[], y=[], y_pred=[]) is None


async def test_omega_keeps_its_dns_survivors_at_the_epoch_end() -> None:
    omega = pg.optimizers.OMEGA(embedding_model=pg.testing.HashEmbeddingModel(dimensions=16), population_size=2)
    var = variable(candidates=[{"instructions": "a", "reward": 0.2}, {"instructions": "b", "reward": 0.9}],
                   best_candidates=[{"instructions": "c", "reward": 0.5}])
    await omega.on_epoch_end(0, [var])
    kept = var.get("best_candidates")
    assert len(kept) == 2 and kept[0]["instructions"] == "b" and var.get("instructions") == "b"


async def test_similarity_distance_is_zero_for_the_same_direction_and_a_half_when_orthogonal() -> None:
    vectors = {"x": [1.0, 0.0], "y": [0.0, 1.0]}

    async def embed(texts):
        return [vectors[text] for text in texts]

    assert await similarity_distance({"p": "x"}, {"p": "x"}, embedding_model=embed) == pytest.approx(0.0)
    assert await similarity_distance({"p": "x"}, {"p": "y"}, embedding_model=embed) == pytest.approx(0.5)
    assert leaf_texts({"a": ["x", {"b": 1}]}) == ["x", "1"]
    assert "['p', 'q']" in mutation_instructions(["p", "q"]) and "combining" in crossover_instructions(["p"])
    json.dumps(mutation_instructions(["p"]))  # plain text
