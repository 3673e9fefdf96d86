import json
import math

import numpy as np
import pytest

import promptgym as pg
from promptgym.optimizers.omega import OMEGA, candidate_text, mutable_schema
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from tests.support import Answer, functional_program, questions

KEYWORD = "UPPERCASE"
GOOD = f"Answer with the question in {KEYWORD} letters."
WORDS = ["paris", "rome", "oslo", "lima", "bern", "kyiv", "doha", "riga"]


def task_lm():
    """The program's model: answers in upper case only when its instructions contain the keyword."""

    def respond(request):
        question = last_user_json(request)["question"]
        system = request.messages[0]["content"]
        return {"answer": question.upper() if KEYWORD in system else question}

    return ScriptedLanguageModel(respond=respond)


def optimizer_lm(mutation=GOOD, crossover="Combine both: reply in UPPERCASE, one word.", vary=False):
    """The optimizer's model: writes ``mutation`` (or ``crossover`` when it sees two values).

    With ``vary``, every answer gets a new suffix (so no child is a copy of an earlier one).
    """
    calls = iter(range(10**6))

    def respond(request):
        inputs = last_user_json(request)
        if isinstance(mutation, BaseException):
            return mutation
        text = crossover if "other_value" in inputs else mutation
        if vary:
            number = next(calls)
            text += f" Variant {number}, in the {WORDS[number % len(WORDS)]} style."
        return {"thinking": "the answers must be upper case", "instructions": text}

    return ScriptedLanguageModel(respond=respond)


def data(n=6):
    words = WORDS[:n]
    return questions(*words), np.array([Answer(answer=w.upper()) for w in words], dtype=object)


class Events(pg.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.events = []

    def on_event(self, event):
        self.events.append(event)

    def of(self, kind):
        return [e for e in self.events if e["event"] == kind]


def make(**kwargs):
    kwargs.setdefault("language_model", optimizer_lm())
    kwargs.setdefault("embedding_model", HashEmbeddingModel())
    return OMEGA(**kwargs)


async def fitted(optimizer, epochs=2, batch_size=2, **fit_kwargs):
    program = await functional_program(task_lm())
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = data()
    events = Events()
    history = await program.fit(x, y, epochs=epochs, batch_size=batch_size, validation_split=1 / 3,
                                minibatch_size=2, verbose=0, callbacks=[events], **fit_kwargs)
    return program, history, events


# -- construction ---------------------------------------------------------------------------


def test_defaults_match_the_seed_document():
    optimizer = make()
    assert (optimizer.k_nearest_fitter, optimizer.merging_rate, optimizer.population_size) == (5, 0.02, 10)
    assert (optimizer.mutation_temperature, optimizer.crossover_temperature, optimizer.selection_temperature,
            optimizer.sampling_temperature) == (0.3, 0.3, 0.3, 0.3)
    assert (optimizer.few_shot_learning, optimizer.nb_min_examples, optimizer.nb_max_examples) == (False, 1, 3)
    assert (optimizer.algorithm, optimizer.selection, optimizer.instructions, optimizer.distance_function) == (
        "dns", "softmax", "", None)


@pytest.mark.parametrize("name", ["mutation_temperature", "crossover_temperature", "selection_temperature",
                                  "sampling_temperature"])
def test_temperature_must_be_positive(name):
    with pytest.raises(ValueError, match=f"{name} must be > 0"):
        make(**{name: 0.0})


@pytest.mark.parametrize("kwargs, message", [
    ({"population_size": 0}, "population_size must be an integer >= 1"),
    ({"algorithm": "map-elites"}, "unknown algorithm 'map-elites'; expected one of 'dns', 'ga'"),
    ({"selection": "tournament"}, "unknown selection 'tournament'; expected one of 'softmax', 'best', 'random'"),
    ({"k_nearest_fitter": 0}, "k_nearest_fitter must be an integer >= 1"),
])
def test_bad_parameters_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def test_missing_models_are_resolved_at_build_and_say_which_call_to_make():
    assert OMEGA().language_model is None  # made before set_default_language_model(): resolved when training starts
    with pytest.raises(ValueError, match=r"embedding model.*set_default_embedding_model"):
        OMEGA(language_model=optimizer_lm()).resolve_models()
    with pytest.raises(ValueError, match=r"language model.*set_default_language_model"):
        OMEGA(embedding_model=HashEmbeddingModel()).resolve_models()
    # Plain GA and a custom distance don't need embeddings.
    ga = OMEGA(language_model=optimizer_lm(), algorithm="ga")
    ga.resolve_models()
    assert ga.embedding_model is None


async def test_string_form_uses_the_default_models():
    lm, em = pg.set_default_language_model(optimizer_lm()), pg.set_default_embedding_model(HashEmbeddingModel())
    program = await functional_program(task_lm())
    program.compile(reward="exactmatch", optimizer="omega")
    optimizer = program.training_setup.optimizer
    assert isinstance(optimizer, OMEGA)
    assert optimizer.language_model is lm and optimizer.embedding_model is em


def test_config_round_trip():
    optimizer = make(population_size=4, selection="best", instructions="Be general.", few_shot_learning=True)
    config = optimizer.get_config()
    clone = OMEGA.from_config(json.loads(json.dumps(config)))
    assert clone.get_config() == config


def test_mutable_schema_bounds_every_text():
    schema = mutable_schema({"instructions": "x", "examples": [], "plan": ["a"], "depth": 2}, max_length=123)
    assert set(schema["properties"]) == {"instructions", "plan", "depth"}
    assert schema["properties"]["instructions"]["maxLength"] == 123
    assert schema["properties"]["plan"]["items"]["maxLength"] == 123
    assert mutable_schema({"examples": []}, 100) is None


# -- variable selection, parents, crossover schedule -----------------------------------------


def test_variable_selection_favours_the_worst_variable():
    optimizer = make()
    optimizer.variable_rewards = {"good/state": [10.0, 10.0], "bad/state": [0.0, 10.0]}
    rng = np.random.default_rng(1)
    picks = [optimizer.choose_variable(["good/state", "bad/state"], rng) for _ in range(4000)]
    assert picks.count("bad/state") / len(picks) == pytest.approx(math.e / (1 + math.e), abs=0.03)


def add_scored(optimizer, instructions, val_scores):
    candidate = optimizer.add_candidate({"qa/state": {"instructions": instructions, "examples": []}})
    candidate.scores["val"] = {str(i): s for i, s in enumerate(val_scores)}
    optimizer.population.append(candidate.id)
    return candidate


def test_parent_selection_strategies():
    for selection, expected in (("best", {1}), ("random", {0, 1, 2})):
        optimizer = make(selection=selection)
        for text, scores in (("a", [0.0]), ("b", [1.0]), ("c", [0.5])):
            add_scored(optimizer, text, scores)
        rng = np.random.default_rng(0)
        assert {optimizer.select_parent(rng).id for _ in range(200)} == expected
    # Softmax at T=0.3: fitness 1.0 vs 0.0 is e^(1/0.3) times likelier.
    optimizer = make()
    add_scored(optimizer, "a", [0.0]), add_scored(optimizer, "b", [1.0])
    rng = np.random.default_rng(0)
    picks = [optimizer.select_parent(rng).id for _ in range(3000)]
    assert picks.count(1) / len(picks) == pytest.approx(math.exp(1 / 0.3) / (1 + math.exp(1 / 0.3)), abs=0.02)


async def test_crossover_probability_grows_with_the_epoch():
    optimizer = make(language_model=optimizer_lm(vary=True), merging_rate=0.5)
    await fitted(optimizer, epochs=3)
    origins = {epoch: [c.origin for c in optimizer.candidates if c.epoch == epoch and c.origin in ("mutation", "crossover")]
               for epoch in range(3)}
    assert origins[0] and set(origins[0]) == {"mutation"}  # 0.5 * 0 = 0%
    assert origins[2] and set(origins[2]) == {"crossover"}  # 0.5 * 2 = 100%


# -- fit ------------------------------------------------------------------------------------


async def test_fit_learns_the_instruction_the_mutation_writes():
    lm, em = optimizer_lm(), HashEmbeddingModel()
    program, history, events = await fitted(make(language_model=lm, embedding_model=em))
    assert KEYWORD in program.trainable_variables[0].get("instructions")
    assert history.history["val_reward"] == [1.0, 1.0]
    assert history.history["reward"][0] < 1.0  # the first batch ran the initial instructions
    accepted = events.of("candidate_accepted")
    assert accepted and accepted[0]["reason"].startswith("ahead by 2 on 2 val examples")
    # The optimizer's calls (its LM at temperature 0.3, plus embeddings) are counted in the optimizer phase.
    assert lm.requests and {r.temperature for r in lm.requests} == {0.3}
    assert sum(history.history["lm_calls_optimizer"]) == len(lm.requests) + em.calls
    # The mutation step saw the failing batch with its ground truth and feedback.
    first = last_user_json(lm.requests[0])
    assert first["current_value"] == {"instructions": "Read the input and answer with the output fields."}
    assert first["batch"][0]["expected"] == {"answer": "PARIS"} and "expected 'PARIS'" in first["batch"][0]["feedback"]
    assert lm.requests[0].schema["properties"]["instructions"]["maxLength"] == 800
    populations = events.of("population_updated")
    assert len(populations) == 2 and program.training_setup.optimizer.best_id in populations[-1]["population"]


@pytest.mark.parametrize("bad, reason", [("PARIS", "label-only"), ("Read the input and answer with the output fields.",
                                                                    "copy of the parent"), ("ok " * 400, "too long")])
async def test_degenerate_mutations_are_rejected_before_validation(bad, reason):
    optimizer = make(language_model=optimizer_lm(mutation=bad))
    program, history, events = await fitted(optimizer, epochs=1)
    rejected = events.of("proposal_rejected")
    assert rejected and all(reason in e["reason"] for e in rejected)
    assert rejected[0]["text"].startswith('{"instructions": ' + json.dumps(bad)[:20])  # what it wrote, shortened
    assert not [c for c in optimizer.candidates if c.origin == "mutation"]
    # The few-shot fallback took their place, and only those were validated.
    proposed = events.of("candidate_proposed")
    assert proposed and {e["origin"] for e in proposed} == {"few_shot"}
    assert optimizer.stats["rejected"] == len(rejected) and optimizer.stats["few_shot"] == len(proposed)


async def test_lm_failure_during_mutation_is_not_fatal():
    optimizer = make(language_model=optimizer_lm(mutation=RuntimeError("model crashed")))
    program, history, events = await fitted(optimizer, epochs=1)
    failures = events.of("proposal_failed")
    assert len(failures) == 2 and "RuntimeError: model crashed" in failures[0]["error"]
    assert optimizer.stats["lm_failures"] == 2
    assert history.history["val_reward"] == [0.0]  # nothing learned, nothing crashed


async def test_few_shot_learning_gives_mutated_generators_demonstrations():
    optimizer = make(few_shot_learning=True, nb_min_examples=2, nb_max_examples=2, grounded_start=False)
    await fitted(optimizer, epochs=1)
    mutated = [c for c in optimizer.candidates if c.origin == "mutation"]
    assert mutated
    for candidate in mutated:
        (value,) = candidate.variables.values()
        examples = value["examples"]
        assert len(examples) == 2 and all(e["outputs"]["answer"] == e["inputs"]["question"].upper() for e in examples)


async def test_the_first_rewrite_of_starting_instructions_is_grounded_in_labelled_examples():
    lm = optimizer_lm(vary=True)
    optimizer = make(language_model=lm, few_shot_learning=True, nb_min_examples=2, nb_max_examples=2)
    await fitted(optimizer, epochs=1)
    first, second = (last_user_json(r) for r in lm.requests[:2])
    # It reads training examples with their labels, and is asked to describe the task, not to fix a failure.
    _, train_y = data()
    labels = {y.answer for y in train_y}
    assert first["examples"] and all(e["expected"]["answer"] in labels for e in first["examples"])
    assert "describe the task" in lm.requests[0].messages[0]["content"]
    assert "format of the expected outputs" in lm.requests[0].schema["properties"]["thinking"]["description"]
    # Its child changes the instructions only: the parent's (empty) demonstrations stay.
    grounded = [c for c in optimizer.candidates if c.origin == "grounded"]
    (value,) = grounded[0].variables.values() if len(grounded) == 1 else [None]
    assert value is not None and value["examples"] == [] and KEYWORD in value["instructions"]
    # Once the instructions are no longer the starting ones, mutations fix failures and bring demonstrations.
    assert "examples" not in second
    mutated = [c for c in optimizer.candidates if c.origin == "mutation"]
    assert mutated and all(len(next(iter(c.variables.values()))["examples"]) == 2 for c in mutated)
    assert optimizer.stats["grounded"] == 1 and list(optimizer.grounded_attempts.values()) == [1]


async def test_grounded_instructions_win_a_dead_heat_and_mutations_do_not():
    always_right = ScriptedLanguageModel(respond=lambda r: {"answer": last_user_json(r)["question"].upper()})
    optimizer = make(language_model=optimizer_lm(vary=True))
    program = await functional_program(always_right)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = data()
    events = Events()
    await program.fit(x, y, epochs=1, batch_size=2, validation_split=1 / 3, minibatch_size=2, verbose=0,
                      callbacks=[events])
    # Every program is perfect: the grounded child is level on validation and on held-out examples, and wins;
    # the mutation after it is level too, and does not.
    accepted = [e for e in events.of("candidate_accepted") if not e["comparison"]]  # OMEGA's own, not fit()'s check
    assert [optimizer.get_candidate(e["candidate"]).origin for e in accepted] == ["grounded"]
    assert accepted[0]["reason"].startswith("level on 2 val examples (lead +0: too close to call) and ")
    assert accepted[0]["reason"].endswith("grounded wins a dead heat")
    assert [c.origin for c in optimizer.candidates] == ["initial", "grounded", "mutation"]
    assert optimizer.best.origin == "grounded"


async def test_grounded_rewrites_stop_after_two_attempts():
    optimizer = make(language_model=optimizer_lm(mutation="PARIS"))  # every rewrite is rejected: a label
    _, _, events = await fitted(optimizer, epochs=2)
    assert [e["operation"] for e in events.of("proposal_rejected")] == ["grounded", "grounded", "mutation", "mutation"]
    assert list(optimizer.grounded_attempts.values()) == [2] and optimizer.stats["grounded"] == 0


async def test_grounded_start_can_be_turned_off():
    lm = optimizer_lm()
    optimizer = make(language_model=lm, grounded_start=False)
    await fitted(optimizer, epochs=1)
    assert not any("examples" in last_user_json(r) for r in lm.requests)
    assert optimizer.grounded_attempts == {} and [c.origin for c in optimizer.candidates][:2] == ["initial", "mutation"]


async def test_embeddings_are_computed_once_per_candidate():
    class CountingEmbeddings(HashEmbeddingModel):
        async def __call__(self, texts):
            self.__dict__.setdefault("texts", []).extend(texts)
            return await super().__call__(texts)

    em = CountingEmbeddings()
    optimizer = make(embedding_model=em, merging_rate=0.3, population_size=3)
    await fitted(optimizer, epochs=3, batch_size=1)
    assert len(em.texts) == len(optimizer._embeddings)  # one text per candidate, never twice
    assert len(em.texts) > 3
    assert len(optimizer.population) <= 3


async def test_custom_distance_function_drives_the_competition():
    calls = []

    async def by_length(c1, c2, embedding_model=None, **kwargs):
        calls.append(embedding_model)
        return abs(len(candidate_text(c1)) - len(candidate_text(c2))) / 100

    optimizer = OMEGA(language_model=optimizer_lm(), distance_function=by_length)
    await fitted(optimizer, epochs=1)
    assert calls and calls == [None] * len(calls)
    assert optimizer.dns_scores and max(optimizer.dns_scores.values()) == 1.0


class FakeContext:
    def __init__(self):
        self.events = []

    async def emit(self, event):
        self.events.append(event)


async def test_epoch_competition_on_a_hand_made_population():
    # The DNS example of test_dns, with distances given by a table over the instructions.
    table = {frozenset("ab"): 0.05, frozenset("ac"): 0.6, frozenset("ad"): 0.7, frozenset("ae"): 0.1,
             frozenset("bc"): 0.5, frozenset("bd"): 0.6, frozenset("be"): 0.15, frozenset("cd"): 0.05,
             frozenset("ce"): 0.7, frozenset("de"): 0.7}

    async def tabled(c1, c2, embedding_model=None):
        return table[frozenset(c1["qa/state"]["instructions"] + c2["qa/state"]["instructions"])]

    for algorithm, size, survivors in (("dns", 10, "ace"), ("dns", 2, "ac"), ("ga", 2, "ab")):
        optimizer = OMEGA(language_model=optimizer_lm(), distance_function=tabled, algorithm=algorithm,
                          population_size=size, k_nearest_fitter=1)
        candidates = [add_scored(optimizer, text, [score, score])
                      for text, score in zip("abcde", [0.9, 0.8, 0.7, 0.6, 0.5])]
        optimizer.best_id = candidates[0].id
        ctx = FakeContext()
        await optimizer.compete_population(ctx)
        kept = "".join(optimizer.get_candidate(i).variables["qa/state"]["instructions"] for i in optimizer.population)
        assert kept == survivors, (algorithm, size)
        assert ctx.events[0].kind == "population_updated"
    # The incumbent best survives even when DNS would drop it.
    optimizer = OMEGA(language_model=optimizer_lm(), distance_function=tabled, population_size=2, k_nearest_fitter=1)
    candidates = [add_scored(optimizer, t, [s]) for t, s in zip("abcde", [0.9, 0.8, 0.7, 0.6, 0.5])]
    optimizer.best_id = candidates[1].id
    await optimizer.compete_population(FakeContext())
    assert candidates[1].id in optimizer.population and len(optimizer.population) == 2


async def test_save_and_resume(tmp_path):
    lm, em = optimizer_lm(), HashEmbeddingModel()
    optimizer = make(language_model=lm, embedding_model=em, population_size=3)
    program, history, _ = await fitted(optimizer, epochs=1)
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = pg.Program.load(str(path))
    restored = loaded.training_setup.optimizer
    assert isinstance(restored, OMEGA)
    assert restored.get_state() == optimizer.get_state()
    assert restored.population == optimizer.population and restored.epochs_done == 1
    assert restored.get_extra_state()["epoch"] == 1
    # Scripted answers are not serializable: give the loaded program and optimizer the scripted models back.
    restored.language_model, restored.embedding_model = lm, em
    loaded.modules[-1].language_model = task_lm()
    known = {c.id for c in optimizer.candidates}
    x, y = data()
    await loaded.fit(x, y, epochs=2, initial_epoch=1, batch_size=2, validation_split=1 / 3, minibatch_size=2, verbose=0)
    assert restored.epochs_done == 2
    new = [c for c in restored.candidates if c.id not in known]
    assert new and min(c.id for c in new) > max(known) and {c.epoch for c in new} == {1}
    assert KEYWORD in loaded.trainable_variables[0].get("instructions")


async def test_parent_runs_only_on_the_examples_the_mutation_reads_and_budget_caps_runs():
    program = await functional_program(task_lm())
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=make(max_evidence=2, max_metric_calls=5))
    x, y = data()
    await program.fit(x, y, epochs=1, batch_size=4, validation_split=1 / 3, minibatch_size=2, verbose=0)
    task = program.modules[-1].language_model
    train_words = {w for w in WORDS[:4]}
    ran_on_train = [last_user_json(r)["question"] for r in task.requests if last_user_json(r)["question"] in train_words]
    # Batch of 4, but the mutation reads 2: the parent runs on those two only. The child's one run on a
    # training example comes from settling its close call below.
    assert ran_on_train == [*WORDS[:2], WORDS[1]]
    optimizer = program.training_setup.optimizer
    # 2 parent runs + a race that can afford only one validation pair (2 more would make 6 > 5); a lead of
    # one example is too close to call, and the last unit of budget settles it on a held-out training
    # example the incumbent (the parent) already ran on. fit()'s check against the start then scores both
    # on the other validation example, outside the budget.
    assert optimizer.metric_calls == 5 and len(task.requests) == 7


def test_the_old_spelling_of_max_instruction_length_is_accepted_with_a_warning():
    with pytest.warns(DeprecationWarning, match="max_instruction_length"):
        optimizer = make(max_instructions_length=300)
    assert optimizer.max_instruction_length == 300
    config = {**optimizer.get_config(), "max_instructions_length": 500}  # a file written before the rename
    del config["max_instruction_length"]
    assert OMEGA.from_config(config).max_instruction_length == 500
