"""Embedding calls are priced, counted by phase and capped (issue 43), the knowledge base's included."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym import DataModel, Field
from promptgym.knowledge_bases import KnowledgeBase
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.prices import Price
from promptgym.lm.spend import SpendCap, SpendCapReached
from promptgym.lm.streaming import estimate_tokens
from promptgym.lm.usage import LEDGER, lm_phase, usage_scope
from promptgym.testing import HashEmbeddingModel
from tests.lm.fake_openai_server import FakeOpenAIServer

PRICE = Price(input_per_mtok=0.5, output_per_mtok=0.0)


def tokens_of(texts: list[str]) -> int:
    return sum(estimate_tokens(text) for text in texts)


async def test_an_embedding_call_counts_its_tokens_and_dollars_in_its_phase():
    em = HashEmbeddingModel(price=PRICE)
    texts = ["the capital of France", "a lazy dog sleeps"]
    before = LEDGER.snapshot()
    with usage_scope() as usage, lm_phase("reward"):
        await em(texts)
    expected = tokens_of(texts)
    assert (usage.calls, usage.prompt_tokens, usage.vectors, usage.estimated_calls) == (1, expected, 2, 1)
    assert usage.cost_usd == pytest.approx(expected * 0.5 / 1_000_000)
    grown = LEDGER.since(before)
    assert grown["reward"].cost_usd == pytest.approx(usage.cost_usd)
    assert "inference" not in grown or grown["inference"].cost_usd == 0


async def test_a_cached_embedding_costs_nothing_and_counts_as_saved():
    em = HashEmbeddingModel(price=PRICE)
    await em(["hello there"])
    with usage_scope() as usage:
        await em(["hello there"])
    assert (usage.calls, usage.cache_hits, usage.cost_usd) == (1, 1, 0.0)
    assert usage.saved_usd == pytest.approx(tokens_of(["hello there"]) * 0.5 / 1_000_000)


async def test_the_servers_token_count_prices_an_http_embedding():
    with FakeOpenAIServer(lambda body: "") as server:  # its usage says a token a character: 6 here
        em = EmbeddingModel(model="openai/text-embedding-3-small", api_base=server.url, api_key="k", price=PRICE)
        with usage_scope() as usage:
            await em(["one", "two"])
    assert (usage.prompt_tokens, usage.cached_tokens, usage.estimated_calls) == (6, 1, 0)
    assert usage.cost_usd == pytest.approx(6 * 0.5 / 1_000_000)


def test_the_table_prices_openai_embedding_models_and_local_ones_are_free():
    assert EmbeddingModel(model="text-embedding-3-small").price.input_per_mtok == pytest.approx(0.02)
    assert EmbeddingModel(model="local/multilingual-e5-small").price.free


async def test_a_cap_stops_an_embedding_call_that_would_cross_it():
    em = HashEmbeddingModel(price=PRICE)
    text = "word " * 400
    cap = SpendCap(usd=len(text) * 0.5 / 1_000_000 / 2)  # half of the call's upper estimate
    with cap.active(), pytest.raises(SpendCapReached):
        await em([text])
    assert em.calls == 0 and cap.spent_usd == 0 and cap.in_flight == 0


async def test_a_capped_embedding_settles_its_real_price():
    em = HashEmbeddingModel(price=PRICE)
    cap = SpendCap(usd=1.0)
    with cap.active():
        await em(["a few words here"])
    assert cap.spent_usd == pytest.approx(tokens_of(["a few words here"]) * 0.5 / 1_000_000)
    assert cap.reserved_usd == pytest.approx(0) and cap.in_flight == 0


async def test_an_unpriced_embedding_model_cannot_be_capped(recwarn):
    em = HashEmbeddingModel(model="openai/some-unknown-embedder", api_base="https://example.invalid/v1")
    with SpendCap(usd=1.0).active(), pytest.raises(SpendCapReached, match="has no price"):
        await em(["x"])
    with usage_scope() as usage:
        await em(["x"])
    assert usage.unpriced_calls == 1 and usage.cost_usd == 0


class Doc(DataModel):
    id: str = Field(description="The key")
    text: str = Field(description="The content")


async def test_a_knowledge_bases_embedding_calls_are_priced(tmp_path: Path):
    em = HashEmbeddingModel(price=PRICE, dimensions=32)
    kb = KnowledgeBase(uri=f"duckdb://{tmp_path / 'kb.db'}", data_models=[Doc], embedding_model=em)
    docs = [Doc(id="a", text="the quick brown fox"), Doc(id="b", text="a lazy dog sleeps all day")]
    with usage_scope() as usage:
        await kb.update(docs)
        await kb.similarity_search("lazy dog", table_name="Doc", k=1)
    assert usage.calls >= 2 and usage.cost_usd > 0
    assert usage.cost_usd == pytest.approx(em.usage.total().cost_usd)
    assert usage.cost_usd == pytest.approx(usage.prompt_tokens * 0.5 / 1_000_000)
