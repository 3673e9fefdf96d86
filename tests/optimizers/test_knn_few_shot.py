"""KNNFewShot: a labelled pool at no program run, traces for other Generators, save/load, TOML names."""

import json

import numpy as np
import pytest

import promptgym as pg
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from tests.support import Answer, Question, questions

TOPICS = {"fruit": ["apple pie", "banana bread", "cherry jam", "plum cake"],
          "car": ["red car engine", "blue car wheel", "car brake pads", "old car seat"]}


def topic_data() -> tuple[np.ndarray, np.ndarray]:
    texts = [text for group in TOPICS.values() for text in group]
    labels = [topic.upper() for topic, group in TOPICS.items() for _ in group]
    return questions(*texts), np.array([Answer(answer=label) for label in labels], dtype=object)


def copies_last_demo(request):
    """Answers what the demonstration nearest the input (the last one shown) answered; '?' without one."""
    shown = [json.loads(m["content"]) for m in request.messages[1:-1] if m["role"] == "assistant"]
    return shown[-1] if shown else {"answer": "?"}


async def knn_program(lm, module=pg.Generator, k=2):
    inputs = pg.Input(data_model=Question)
    outputs = await module(data_model=Answer, language_model=lm)(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="knn")
    optimizer = pg.optimizers.KNNFewShot(k=k, embedding_model=HashEmbeddingModel(dimensions=512))
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    return program, optimizer


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_labels_become_the_pool_without_a_program_run(tmp_path):
    lm = ScriptedLanguageModel(respond=copies_last_demo)
    program, optimizer = await knn_program(lm)
    x, y = topic_data()
    history = await program.fit(x, y, validation_data=(x[:1], y[:1]), epochs=1, batch_size=8, validation_freq=2,
                                verbose=0)
    # no training run; the only calls race start, retrieval and a fixed set on the one validation example
    assert len(lm.requests) == 3 and optimizer.metric_calls == 0 and history.history["reward"] == [None]
    assert [c["accepted"] for c in history.comparisons][:1] == [True]
    assert optimizer.embedding_model.usage.total().calls == 2  # the pool in one call, the validation input
    state = program.get_variables()["knn/generator/state"] if "knn/generator/state" in program.get_variables() \
        else next(iter(program.get_variables().values()))
    assert len(state["retrieval"]["pool"]) == 8 and state["examples"] == []
    predictions = await program.predict(questions("cherry cake", "car wheel"), verbose=0)
    assert [p.get("answer") for p in predictions] == ["FRUIT", "CAR"]
    program.save(tmp_path / "knn.json")
    loaded = pg.Program.load(tmp_path / "knn.json")
    assert next(iter(loaded.get_variables().values()))["retrieval"] == state["retrieval"]


async def test_a_chain_of_thought_learns_from_successful_traces():
    def right_on_fruit(request):
        question = last_user_json(request)["question"]
        answer = "FRUIT" if question in TOPICS["fruit"] else "?"
        return {"thinking": "t", "answer": answer}

    lm = ScriptedLanguageModel(respond=right_on_fruit)
    program, optimizer = await knn_program(lm, module=pg.ChainOfThought)
    x, y = topic_data()
    await program.fit(x, y, validation_data=(x[:1], y[:1]), epochs=1, batch_size=8, validation_freq=2, verbose=0)
    assert optimizer.metric_calls == 8
    # the one validation example is right with or without demonstrations: the tie keeps the start, so the
    # pool is read from the retrieval candidate
    assert next(iter(program.get_variables().values())).get("retrieval") is None
    retrieval = next(c for c in optimizer.candidates if c.origin == "knn_few_shot")
    pool = next(iter(retrieval.variables.values()))["retrieval"]["pool"]
    assert sorted(example["inputs"]["question"] for example in pool) == sorted(TOPICS["fruit"])
    assert all(example["outputs"] == {"thinking": "t", "answer": "FRUIT"} for example in pool)


def test_registered_names_and_config_round_trip():
    optimizer = pg.optimizers.get({"class_name": "KNNFewShot", "config": {"k": 4}})
    assert isinstance(optimizer, pg.optimizers.KNNFewShot) and optimizer.k == 4
    assert isinstance(pg.optimizers.get("knnfewshot"), pg.optimizers.KNNFewShot)
    again = pg.optimizers.KNNFewShot.from_config(json.loads(json.dumps(optimizer.get_config())))
    assert again.k == 4 and again.embedding_model.model == "local/multilingual-e5-small"
