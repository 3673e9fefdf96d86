"""Demonstrations retrieved per input: choice, determinism, save/load without re-embedding the pool."""

from __future__ import annotations

import json

import numpy as np
import pytest

import promptgym as pg
from promptgym.programs.summary import program_summary
from promptgym.modules.retrieval import decode_vectors, nearest, retrieval_state
from promptgym.testing import HashEmbeddingModel
from tests.support import Answer, Question, echo_lm

POOL = [("apple pie recipe", "FRUIT"), ("banana bread recipe", "FRUIT"), ("red car engine", "CAR"),
        ("blue car wheel", "CAR"), ("old train station", "TRAIN")]


class CountingEmbeddings(HashEmbeddingModel):
    texts: list[str] = []

    async def _embed(self, texts):
        CountingEmbeddings.texts += texts
        return await super()._embed(texts)


pg.saving.register_synalinks_serializable()(CountingEmbeddings)


async def retrieving_generator(k: int = 2) -> tuple[pg.Generator, object]:
    lm = echo_lm()
    embeddings = CountingEmbeddings(dimensions=512)
    examples = [{"inputs": {"question": q}, "outputs": {"answer": a}} for q, a in POOL]
    vectors = await embeddings([f"question: {q}" for q, _ in POOL])
    generator = pg.Generator(data_model=Answer, language_model=lm, name="answerer")
    generator.state.assign({**generator.state.get_json(),
                            "retrieval": retrieval_state(examples, vectors, k, embeddings)})
    return generator, lm


def shown(request) -> list[str]:
    return [json.loads(m["content"])["question"] for m in request.messages[1:-1] if m["role"] == "user"]


async def test_each_input_gets_its_nearest_pool_examples_nearest_last():
    generator, lm = await retrieving_generator(k=2)
    await generator(Question(question="car engine noise"))
    await generator(Question(question="banana recipe"))
    assert set(shown(lm.requests[0])) == {"red car engine", "blue car wheel"}
    assert shown(lm.requests[0])[-1] == "red car engine"
    assert set(shown(lm.requests[1])) == {"apple pie recipe", "banana bread recipe"}
    assert shown(lm.requests[1])[-1] == "banana bread recipe"


async def test_the_prompt_is_deterministic_and_fixed_examples_come_first():
    generator, lm = await retrieving_generator(k=1)
    generator.state.assign({**generator.state.get_json(),
                            "examples": [{"inputs": {"question": "fixed"}, "outputs": {"answer": "F"}}]})
    for _ in range(2):
        await generator(Question(question="old station"))
    assert lm.requests[0].messages == lm.requests[1].messages
    assert shown(lm.requests[0]) == ["fixed", "old train station"]


async def test_save_and_load_keep_the_choice_without_embedding_the_pool_again(tmp_path):
    generator, lm = await retrieving_generator(k=2)
    program = pg.Sequential([pg.Input(data_model=Question), generator], name="knn")
    await program(Question(question="car wheel"))
    program.save(tmp_path / "program.json")
    CountingEmbeddings.texts = []
    loaded = pg.Program.load(tmp_path / "program.json")
    loaded_lm = loaded.modules[-1].language_model = echo_lm()
    await loaded(Question(question="car wheel"))
    await loaded(Question(question="apple bread"))
    assert CountingEmbeddings.texts == ["question: apple bread"]  # the pool never, the seen input not again
    assert loaded_lm.requests[0].messages == lm.requests[0].messages
    assert "0 examples + 2 nearest of 5 (local/multilingual-e5-small) per input" in program_summary(loaded, width=300)


def test_ties_go_to_the_earlier_pool_entry_and_vectors_round_trip():
    examples = [{"inputs": {"q": str(i)}, "outputs": {"a": str(i)}} for i in range(3)]
    state = retrieval_state(examples, np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), k=1, embedding_model=None)
    assert nearest(state, np.array([1.0, 0.0])) == [examples[0]]
    assert decode_vectors(state["vectors"]).shape == (3, 2)


async def test_a_broken_retrieval_entry_is_named():
    generator, _ = await retrieving_generator()
    broken = generator.state.get_json()
    broken["retrieval"]["pool"] = broken["retrieval"]["pool"][:2]
    generator.state.assign(broken)
    with pytest.raises(ValueError, match="'answerer/state'.*2 pool examples but 5 vectors"):
        await generator(Question(question="x"))
