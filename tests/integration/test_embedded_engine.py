"""The real embedded engine: smallest model, real weights, real grammar."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import promptgym as pg
from promptgym.lm.local_models import SMALLEST_LOCAL_MODEL, ensure_local_model, file_sha256, local_model_spec

pytestmark = pytest.mark.integration


class Review(pg.DataModel):
    text: str = pg.Field(description="A short product review")


class Sentiment(pg.DataModel):
    label: Literal["positive", "negative"] = pg.Field(description="The sentiment of the review")


def test_weights_are_verified_and_reused():
    path = ensure_local_model(SMALLEST_LOCAL_MODEL)
    assert file_sha256(path) == local_model_spec(SMALLEST_LOCAL_MODEL).sha256
    assert ensure_local_model(SMALLEST_LOCAL_MODEL) == path


async def test_generator_output_is_constrained_to_the_schema():
    lm = pg.LanguageModel(model=f"local/{SMALLEST_LOCAL_MODEL}", cache=False, max_tokens=32)
    inputs = pg.Input(data_model=Review)
    program = pg.Program(inputs=inputs, outputs=await pg.Generator(data_model=Sentiment, language_model=lm)(inputs))
    x = np.array([Review(text="I love it, works perfectly."), Review(text="Broke after a day. Awful."),
                  Review(text="Great value, very happy.")], dtype=object)
    predictions = await program.predict(x, batch_size=3, verbose=0)
    assert predictions.failures == {}
    assert all(p.label in ("positive", "negative") for p in predictions)
    usage = lm.usage.total()
    assert usage.calls == 3 and usage.completion_tokens > 0 and usage.prompt_tokens > 20


async def test_cache_makes_a_rerun_free():
    lm = pg.LanguageModel(model=f"local/{SMALLEST_LOCAL_MODEL}", max_tokens=16)
    messages = [{"role": "user", "content": "Say yes."}]
    schema = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 10}}, "required": ["word"]}
    first = await lm(messages, schema=schema)
    second = await lm(messages, schema=schema)
    assert first == second
    assert lm.usage.total().cache_hits == 1


async def test_embedded_embeddings_are_unit_vectors_and_meaningful():
    em = pg.EmbeddingModel(model="local/multilingual-e5-small")
    vectors = await em(["The cat sleeps on the sofa.", "A cat is sleeping on a couch.", "Stock prices fell sharply."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


async def test_base_model_output_is_constrained_too():
    lm = pg.LanguageModel(model="local/gemma-3-270m", cache=False, max_tokens=24)
    answer = await pg.Generator(data_model=Sentiment, language_model=lm)(Review(text="Absolutely fantastic, I love it."))
    assert answer.label in ("positive", "negative")
    assert lm.usage.total().calls == 1
