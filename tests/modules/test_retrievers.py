"""synalinks' single-table retrievers and RRFReranker on a DuckDB knowledge base (scripted LM, hash embedder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import promptgym as synalinks
from promptgym.modules.knowledge.retrieve_knowledge import MAX_QUERIES
from promptgym.modules.retrievers import queries
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel
from tests.support import Document
from tests.support import Question as Query

TEXTS = {"p": "Paris is the capital of France", "b": "Berlin is the capital of Germany",
         "r": "Rome is the capital of Italy"}
RETRIEVERS = ["SimilaritySearch", "FullTextSearch", "RegexSearch", "HybridFTSSearch", "HybridRegexSearch"]


@pytest.fixture
async def kb(tmp_path: Path) -> Any:
    kb = synalinks.KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Document],
                                 embedding_model=HashEmbeddingModel(dimensions=64))
    await kb.update([Document(id=key, text=text) for key, text in TEXTS.items()])
    return kb


def writes(query: dict[str, Any]) -> ScriptedLanguageModel:
    """An LM that writes this query, whatever it is asked."""
    return ScriptedLanguageModel(respond=lambda request: query)


async def ids(module: Any, question: str = "?") -> list[str]:
    return [row["id"] for row in (await module(Query(question=question))).get("result")]


# -- each retriever: the rows of its one search, k and thresholds ---------------------------------


async def test_similarity_search_returns_the_nearest_rows_and_applies_k_and_threshold(kb: Any) -> None:
    lm = writes({"similarity_search": ["Rome Italy"]})
    direct = await kb.similarity_search(["Rome Italy"], table_name="Document", k=3)
    assert [row["id"] for row in direct][0] == "r"
    search = synalinks.SimilaritySearch(knowledge_base=kb, language_model=lm, data_model=Document, k=3)
    assert (await search(Query(question="Italy?"))).get("result") == direct
    assert await ids(synalinks.SimilaritySearch(knowledge_base=kb, language_model=lm, data_model=Document, k=1)) \
        == ["r"]
    between = (direct[0]["score"] + direct[1]["score"]) / 2  # a distance: rows farther than it go
    assert await ids(synalinks.SimilaritySearch(knowledge_base=kb, language_model=lm, data_model=Document,
                                                threshold=between)) == ["r"]


async def test_fulltext_search_ranks_by_bm25_and_applies_k_threshold_and_conjunctive(kb: Any) -> None:
    def search(query: list[str], **options: Any) -> Any:
        return synalinks.FullTextSearch(knowledge_base=kb, language_model=writes({"fulltext_search": query}),
                                        data_model=Document, **options)

    assert await ids(search(["Germany"])) == ["b"]
    everything = await ids(search(["capital France"]))
    assert everything[0] == "p" and sorted(everything) == ["b", "p", "r"]
    assert await ids(search(["capital France"], k=2)) == everything[:2]
    assert await ids(search(["capital France"], threshold=0.99)) == ["p"]  # scores are in [0, 1], best 1.0
    assert await ids(search(["capital France"], conjunctive=True)) == ["p"]  # every term must match


async def test_regex_search_matches_its_pattern_with_fields_and_case(kb: Any) -> None:
    def search(pattern: str, **options: Any) -> Any:
        return synalinks.RegexSearch(knowledge_base=kb, language_model=writes({"regex_search": pattern}),
                                     data_model=Document, **options)

    assert await ids(search("^R")) == ["r"]
    assert await ids(search("^rome")) == []
    assert await ids(search("^rome", case_sensitive=False)) == ["r"]
    assert await ids(search("^b$")) == ["b"]  # the id is a string field too
    assert await ids(search("^b$", fields=["text"])) == []
    assert len(await ids(search("capital", k=2))) == 2


async def test_hybrid_fts_search_fuses_bm25_and_vectors_by_rrf(kb: Any) -> None:
    query = {"similarity_search": ["Berlin Germany"], "keywords": ["Germany"]}
    search = synalinks.HybridFTSSearch(knowledge_base=kb, language_model=writes(query), data_model=Document, k=1)
    rows = (await search(Query(question="Germany?"))).get("result")
    assert [row["id"] for row in rows] == ["b"]
    assert rows[0]["score"] == pytest.approx(1 / 61 + 1 / 61)  # first in both rankings, k_rank 60
    assert rows == await kb.hybrid_fts_search(["Berlin Germany"], keywords=["Germany"], table_name="Document", k=1)
    wider = synalinks.HybridFTSSearch(knowledge_base=kb, language_model=writes(query), data_model=Document,
                                      k_rank=1)
    assert (await wider(Query(question="Germany?"))).get("result")[0]["score"] == pytest.approx(1 / 2 + 1 / 2)


async def test_hybrid_regex_search_fuses_vectors_and_regex_matches(kb: Any) -> None:
    query = {"similarity_search": ["Paris France"], "regex_patterns": ["^Paris"]}
    search = synalinks.HybridRegexSearch(knowledge_base=kb, language_model=writes(query), data_model=Document)
    rows = (await search(Query(question="France?"))).get("result")
    assert rows[0]["id"] == "p" and rows[0]["score"] == pytest.approx(2 / 61)
    assert rows == await kb.hybrid_regex_search(["Paris France"], pattern_or_patterns=["^Paris"],
                                                table_name="Document", k=10)


async def test_a_retriever_with_no_table_lets_the_lm_pick_one_of_the_knowledge_base(kb: Any) -> None:
    lm = writes({"fulltext_search": ["Italy"], "table_name": "Document"})
    search = synalinks.FullTextSearch(knowledge_base=kb, language_model=lm)
    assert search.table_name is None
    schema = search.query_generator.schema
    assert schema["properties"]["table_name"]["enum"] == ["Document"]
    assert schema["properties"]["fulltext_search"]["maxItems"] == MAX_QUERIES  # the bound survives
    assert await ids(search) == ["r"]


async def test_the_output_holds_the_query_the_rows_then_the_input(kb: Any) -> None:
    lm = writes({"fulltext_search": ["Italy"]})
    for options, keys in (({}, ["fulltext_search", "result", "question"]),
                          ({"return_query": False}, ["result", "question"]),
                          ({"return_inputs": False, "return_query": False}, ["result"])):
        inputs = synalinks.Input(data_model=Query)
        outputs = await synalinks.FullTextSearch(knowledge_base=kb, language_model=lm, data_model=Document,
                                                 **options)(inputs)
        assert list(outputs.get_schema()["properties"]) == keys
        value = await synalinks.Program(inputs=inputs, outputs=outputs)(Query(question="Rome?"))
        assert list(value.get_json()) == keys and [row["id"] for row in value.get("result")] == ["r"]


async def test_no_query_or_no_input_gives_none(kb: Any) -> None:
    search = synalinks.SimilaritySearch(knowledge_base=kb, language_model=writes({"similarity_search": []}),
                                        data_model=Document)
    assert await search(Query(question="?")) is None
    assert await search(None) is None


def test_the_query_lists_are_bounded() -> None:
    for model in (queries.SimilaritySearchInput, queries.FullTextSearchInput, queries.HybridFTSSearchInput,
                  queries.HybridRegexSearchInput):
        assert model.get_schema()["properties"]["similarity_search" if "Hybrid" in model.__name__ else
                                                 next(iter(model.model_fields))]["maxItems"] == MAX_QUERIES
    assert queries.RegexSearchInput.get_schema()["properties"]["regex_search"]["maxLength"] == 120


# -- variables, checks, save and load -----------------------------------------------------------


async def test_the_settings_variable_is_read_at_every_call_and_checked(kb: Any) -> None:
    search = synalinks.FullTextSearch(knowledge_base=kb, language_model=writes({"fulltext_search": ["capital"]}),
                                      data_model=Document)
    assert search.prompt_variable in search.trainable_variables
    assert search.settings not in search.trainable_variables
    assert len(await ids(search)) == 3
    search.settings.assign({**search.settings.value, "k": 1})
    assert search.k == 1 and len(await ids(search)) == 1
    with pytest.raises(ValueError, match="`k` must be a positive integer"):
        search.settings.assign({**search.settings.value, "k": 0})
    with pytest.raises(ValueError, match="`k` must be a positive integer"):
        synalinks.FullTextSearch(knowledge_base=kb, language_model=writes({}), data_model=Document, k=0)
    with pytest.raises(ValueError, match="output_format"):
        synalinks.FullTextSearch(knowledge_base=kb, language_model=writes({}), data_model=Document,
                                 output_format="xml")


OPTIONS = {"SimilaritySearch": {"threshold": 2.5, "ef_search": 40},
           "FullTextSearch": {"threshold": 0.1, "conjunctive": True, "bm25_b": 0.5, "bm25_k": 1.1},
           "RegexSearch": {"fields": ["text"], "case_sensitive": False},
           "HybridFTSSearch": {"k_rank": 5, "fulltext_threshold": 0.1, "similarity_threshold": 2.5},
           "HybridRegexSearch": {"k_rank": 5, "fields": ["text"], "case_sensitive": False}}


@pytest.mark.parametrize("name", RETRIEVERS)
async def test_a_retriever_saves_and_loads_with_its_settings_prompt_and_knowledge_base(kb: Any, tmp_path: Path,
                                                                                       name: str) -> None:
    inputs = synalinks.Input(data_model=Query)
    module = getattr(synalinks, name)(knowledge_base=kb, language_model=writes({}), data_model=Document, k=2,
                                      instructions="Write short queries.", return_query=False, name="retriever",
                                      **OPTIONS[name])
    program = synalinks.Program(inputs=inputs, outputs=await module(inputs), name="retrieval")
    program.save(str(tmp_path / "program.json"))
    kb.close()
    loaded = synalinks.Program.load(str(tmp_path / "program.json")).get_module("retriever")
    assert type(loaded) is type(module) and loaded.get_config() == module.get_config()
    assert loaded.settings.value == {"k": 2, **{key: value for key, value in module.settings.value.items()
                                                if key != "k"}}
    assert all(getattr(loaded, key) == value for key, value in OPTIONS[name].items())
    assert loaded.prompt_variable.value["instructions"] == "Write short queries."
    assert loaded.table_name == "Document" and loaded.knowledge_base.sql_adapter.uri == str(tmp_path / "kb.db")


# -- RRFReranker --------------------------------------------------------------------------------


def hits(*rows: Any) -> Any:
    rows = [{"id": row} if isinstance(row, str) else row for row in rows]
    return synalinks.JsonDataModel(json={"result": rows}, schema=synalinks.GenericResult.get_schema())


def rrf(*ranks: int, k_rank: int = 60) -> float:
    """The RRF score of a row at these 1-based ranks, summed in the reranker's order."""
    score = 0.0
    for rank in ranks:
        score += 1.0 / (k_rank + rank)
    return score


async def test_rrf_merges_two_lists_by_reciprocal_rank() -> None:
    fused = (await synalinks.RRFReranker(id_key="id")([hits("x", "y", "z"), hits("y", "w", "x")])).get("result")
    assert [(row["id"], row["rrf_score"]) for row in fused] == [
        ("y", rrf(2, 1)), ("x", rrf(1, 3)), ("w", rrf(2)), ("z", rrf(3))]
    short = await synalinks.RRFReranker(id_key="id", k=2, k_rank=1)([hits("x", "y", "z"), hits("y", "w", "x")])
    assert [(row["id"], row["rrf_score"]) for row in short.get("result")] == [("y", 1 / 3 + 1 / 2),
                                                                             ("x", 1 / 2 + 1 / 4)]


async def test_rrf_merges_a_rows_fields_keeps_first_seen_order_on_ties_and_skips_none() -> None:
    first = hits({"id": "x", "score": 0.9, "text": "a"}, "y")
    second = hits({"id": "q"}, {"id": "x", "score": 0.2})
    fused = (await synalinks.RRFReranker(id_key="id")([first, None, second])).get("result")
    assert fused == [{"id": "x", "score": 0.2, "text": "a", "rrf_score": rrf(1, 2)},
                     {"id": "q", "rrf_score": rrf(1)}, {"id": "y", "rrf_score": rrf(2)}]
    assert await synalinks.RRFReranker()([None, hits()]) is None


async def test_rrf_without_id_key_matches_whole_rows() -> None:
    fused = (await synalinks.RRFReranker()([hits({"t": "a"}, {"t": "b"}), hits({"t": "b"})])).get("result")
    assert fused == [{"t": "b", "rrf_score": rrf(2, 1)}, {"t": "a", "rrf_score": rrf(1)}]


def test_rrf_checks_and_round_trips_its_config() -> None:
    module = synalinks.RRFReranker(k_rank=42, k=5, id_key="id", name="rrf")
    rebuilt = synalinks.modules.deserialize(synalinks.modules.serialize(module))
    assert (rebuilt.k_rank, rebuilt.k, rebuilt.id_key, rebuilt.name) == (42, 5, "id", "rrf")
    for bad in ({"k_rank": 0}, {"k": 0}, {"k_rank": True}):
        with pytest.raises(ValueError):
            synalinks.RRFReranker(**bad)


async def test_a_program_fuses_fulltext_and_regex_hits(kb: Any) -> None:
    """synalinks' canonical reranker use: two retrievers over one table, fused; each reads its own query."""

    def respond(request: Any) -> dict[str, Any]:
        if "regex_search" in request.schema["properties"]:
            return {"regex_search": "^(Rome|Paris)"}
        return {"fulltext_search": ["Italy"]}

    lm = ScriptedLanguageModel(respond=respond)
    inputs = synalinks.Input(data_model=Query)
    keyword = await synalinks.FullTextSearch(knowledge_base=kb, language_model=lm, data_model=Document,
                                             name="fts")(inputs)
    pattern = await synalinks.RegexSearch(knowledge_base=kb, language_model=lm, data_model=Document,
                                          name="rgx")(inputs)
    fused = await synalinks.RRFReranker(id_key="id", name="rrf")([keyword, pattern])
    program = synalinks.Program(inputs=inputs, outputs=fused, name="rag")
    rows = (await program(Query(question="Italy or France?"))).get("result")
    regex_order = [row["id"] for row in await kb.regex_search("^(Rome|Paris)", table_name="Document")]
    assert [row["id"] for row in rows] == ["r", "p"] and rows[0]["rrf_score"] == rrf(1, regex_order.index("r") + 1)
