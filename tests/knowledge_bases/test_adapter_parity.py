"""The DuckDB and LanceDB adapters behave alike: the same rows, the same search results and order, the same errors.

Each test runs once per adapter (``uri``); the LanceDB runs skip where the ``lancedb`` extra is absent.
"""

from __future__ import annotations

import asyncio
import datetime
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from promptgym import DataModel
from promptgym.core.json_data_model import JsonDataModel
from promptgym.knowledge_bases import DuckDBAdapter, KnowledgeBase, KnowledgeBaseError
from promptgym.testing import HashEmbeddingModel


class Article(DataModel):
    id: str
    title: str
    body: str
    source: str
    year: int


ARTICLES = [
    Article(id="a1", title="Paris", body="Paris is the capital of France", source="geo.md", year=2001),
    Article(id="a2", title="Berlin", body="Berlin is the capital of Germany", source="geo.md", year=2002),
    Article(id="a3", title="Cats", body="cats sleep most of the day", source="pets.md", year=2003),
    Article(id="a4", title="Dogs", body="dogs guard the house and love walks", source="pets.md", year=2004),
    Article(id="a5", title="Rome", body="Rome is the capital of Italy, with ancient ruins", source="geo.md", year=2005),
    Article(id="a6", title="Tea", body="green tea from Japan; it's calming", source="food.md", year=2006),
]


@pytest.fixture(params=["duckdb", "lancedb"])
def uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "lancedb":
        pytest.importorskip("lancedb")
        return f"lancedb://{tmp_path / 'kb'}"
    return f"duckdb://{tmp_path / 'kb.db'}"


def open_kb(uri: str, **kwargs: Any) -> KnowledgeBase:
    kwargs.setdefault("embedding_model", HashEmbeddingModel(dimensions=32))
    return KnowledgeBase(uri=uri, data_models=[Article], **kwargs)


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


async def filled(uri: str, **kwargs: Any) -> KnowledgeBase:
    kb = open_kb(uri, **kwargs)
    await kb.update(ARTICLES)
    return kb


def test_the_uri_picks_the_adapter(tmp_path: Path) -> None:
    assert type(KnowledgeBase(uri=":memory:").adapter) is DuckDBAdapter
    assert type(KnowledgeBase(uri=str(tmp_path / "plain.db")).adapter) is DuckDBAdapter
    pytest.importorskip("lancedb")
    from promptgym.knowledge_bases.lancedb_adapter import LanceDBAdapter

    kb = KnowledgeBase(uri=f"lancedb://{tmp_path / 'lance'}", data_models=[Article])
    assert type(kb.adapter) is LanceDBAdapter
    assert kb.adapter.uri == str(tmp_path / "lance")


async def test_rows_by_key_pages_filters_and_upserts(uri: str) -> None:
    kb = await filled(uri)
    assert await kb.count(table_name="Article") == 6
    found = await kb.get(["a3", "zz", "a1"], table_name="Article")
    assert [row.get_json()["title"] if row else None for row in found] == ["Cats", None, "Paris"]
    page = await kb.getall(table_name="Article", limit=2, offset=1)
    assert [row.get_json() for row in page] == [ARTICLES[1].get_json(), ARTICLES[2].get_json()]
    geo = await kb.getall(table_name="Article", filters={"source": "geo.md", "year": [2002, 2005]})
    assert [row.get_json()["id"] for row in geo] == ["a2", "a5"]
    assert await kb.update(Article(id="a3", title="Cats", body="cats purr", source="pets.md", year=2030)) == "a3"
    assert (await kb.get("a3", table_name="Article")).get_json()["body"] == "cats purr"
    assert await kb.count(table_name="Article") == 6
    assert await kb.delete(["a1", "nope"], table_name="Article") == 1
    assert await kb.count(table_name="Article") == 5
    assert await kb.adapter.existing_ids(["a1", "a2", "x"], table_name="Article") == {"a2"}
    kept = await kb.adapter.delete_others(["a4"], table_name="Article", where={"source": "pets.md"})
    assert kept == 1 and await kb.get("a3", table_name="Article") is None
    assert (await kb.sql("SELECT count(*) AS n FROM Article WHERE year > ?", params=[2003])) == [{"n": 3}]
    kb.close()


async def test_fulltext_similarity_regex_and_hybrid_results(uri: str) -> None:
    kb = await filled(uri)
    fulltext = await kb.fulltext_search("capital France", table_name="Article", k=3)
    assert ids(fulltext)[0] == "a1" and fulltext[0]["score"] == 1.0
    assert set(ids(fulltext)) == {"a1", "a2", "a5"}
    assert ids(await kb.fulltext_search("capital France", table_name="Article", k=3, conjunctive=True)) == ["a1"]
    filtered = await kb.fulltext_search("capital", table_name="Article", filters={"year": [2002, 2005]})
    assert sorted(ids(filtered)) == ["a2", "a5"]
    similar = await kb.similarity_search("the capital of France", table_name="Article", k=3)
    # HashEmbeddingModel hashes into 32 buckets: "Berlin"'s words collide with the query's more than "Paris"'s do.
    assert [(row["id"], round(row["score"], 3)) for row in similar] == [("a2", 0.125), ("a1", 0.198), ("a5", 0.312)]
    pets = await kb.similarity_search("capital", table_name="Article", k=5, filters={"source": "pets.md"})
    assert [(row["id"], round(row["score"], 3)) for row in pets] == [("a4", 0.225), ("a3", 1.0)]
    assert ids(await kb.regex_search("CAPITAL OF (france|italy)", table_name="Article", case_sensitive=False)) \
        == ["a1", "a5"]
    assert ids(await kb.regex_search("it's", table_name="Article", fields=["body"])) == ["a6"]
    assert ids(await kb.regex_search("capital", table_name="Article", k=1)) == ["a1"]
    hybrid = await kb.hybrid_fts_search("capital of France", table_name="Article", k=3)
    assert [(row["id"], round(row["score"], 3)) for row in hybrid] == [("a1", 0.033), ("a2", 0.032), ("a5", 0.032)]
    regex_hybrid = await kb.hybrid_regex_search("ancient ruins", pattern_or_patterns=["Ital"], table_name="Article",
                                                k=2)
    assert [(row["id"], round(row["score"], 3)) for row in regex_hybrid] == [("a5", 0.033), ("a6", 0.016)]
    kb.close()


def test_both_adapters_give_the_same_results(tmp_path: Path) -> None:
    pytest.importorskip("lancedb")

    async def results(uri: str) -> list[Any]:
        kb = await filled(uri)
        out = [
            [(row["id"], round(row["score"], 4)) for row in await kb.similarity_search("capital of Germany",
                                                                                        table_name="Article", k=6)],
            ids(await kb.regex_search("a", table_name="Article", k=4)),
            ids(await kb.hybrid_regex_search("dogs", pattern_or_patterns=["house"], table_name="Article", k=3)),
            [row.get_json() for row in await kb.getall(table_name="Article", filters={"source": ["pets.md"]})],
            ids(await kb.fulltext_search("tea Japan", table_name="Article", k=2))[:1],
            await kb.sql("SELECT id, year FROM Article ORDER BY year DESC LIMIT 2"),
        ]
        kb.close()
        return out

    duck = asyncio.run(results(f"duckdb://{tmp_path / 'kb.db'}"))
    lance = asyncio.run(results(f"lancedb://{tmp_path / 'kb'}"))
    assert lance == duck
    assert duck[0][0] == ("a2", pytest.approx(duck[0][0][1]))


async def test_a_record_updated_without_its_vector_keeps_the_stored_one(uri: str) -> None:
    kb = KnowledgeBase(uri=uri, data_models=[Article])  # no embedder: vectors come with the records
    first = Article(id="v1", title="t", body="b", source="s", year=1).get_json()
    await kb.update(JsonDataModel(json={**first, "embedding": [1.0, 0.0, 0.0]}, schema=Article.get_schema()))
    await kb.update(Article(id="v1", title="t", body="new body", source="s", year=2))
    rows = await kb.similarity_search(table_name="Article", vector_or_vectors=[1.0, 0.0, 0.0], k=1)
    assert [(row["id"], row["body"], round(row["score"], 6)) for row in rows] == [("v1", "new body", 0.0)]
    kb.close()


async def test_reopening_with_another_data_model_names_both_field_lists(uri: str) -> None:
    (await filled(uri)).close()

    class Article(DataModel):  # the same title, another field
        id: str
        title: str
        summary: str

    with pytest.raises(KnowledgeBaseError, match="was created with fields") as error:
        KnowledgeBase(uri=uri, data_models=[Article])
    assert "body: VARCHAR" in str(error.value) and "summary: VARCHAR" in str(error.value)


async def test_another_embedding_dimension_names_both_sizes(uri: str) -> None:
    (await filled(uri)).close()
    kb = KnowledgeBase(uri=uri, embedding_model=HashEmbeddingModel(dimensions=16))
    with pytest.raises(KnowledgeBaseError, match="stores 32-dimensional vectors") as error:
        await kb.similarity_search("capital", table_name="Article")
    assert "16-dimensional" in str(error.value)
    with pytest.raises(KnowledgeBaseError, match="16-dimensional"):
        await kb.update(Article(id="b1", title="x", body="y", source="z", year=1))
    kb.close()


async def test_an_unknown_filter_field_is_an_error_naming_it(uri: str) -> None:
    kb = await filled(uri)
    with pytest.raises(ValueError, match="has no field 'author'"):
        await kb.getall(table_name="Article", filters={"author": "me"})
    kb.close()


async def test_concurrent_writers_and_readers_lose_nothing_committed(uri: str) -> None:
    kb = open_kb(uri)

    async def write(index: int) -> None:
        await kb.update(Article(id=f"c{index:02d}", title=f"t{index}", body=f"body {index}", source="s", year=index))

    async def read() -> int:
        return len(await kb.getall(table_name="Article", limit=100))

    counts = await asyncio.gather(*[write(index) for index in range(20)], *[read() for _ in range(10)])
    assert all(isinstance(count, int) and 0 <= count <= 20 for count in counts[20:])
    kb.close()
    reopened = open_kb(uri)
    assert await reopened.count(table_name="Article") == 20
    assert [row.get_json()["id"] for row in await reopened.getall(table_name="Article", limit=3)] == \
        ["c00", "c01", "c02"]
    reopened.close()


async def test_drop_wipe_settings_and_table_info(uri: str) -> None:
    kb = await filled(uri)
    kb.adapter.set_setting("chunk_size", "400")
    assert kb.adapter.get_setting("chunk_size") == "400"
    info = kb.adapter.table_info()
    assert [(entry["table"], entry["rows"], entry["dimension"]) for entry in info] == [("Article", 6, 32)]
    assert [model.get_schema()["title"] for model in kb.get_symbolic_data_models()] == ["Article"]
    assert await kb.drop_table("Article") is True and await kb.drop_table("Article") is False
    assert await kb.count(table_name="Article") == 0
    kb.adapter.wipe_database()
    assert kb.adapter.get_setting("chunk_size") is None
    kb.close()


async def test_bulk_loading_a_csv(uri: str, tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("name,age\nada,36\nalan,41\n")
    kb = KnowledgeBase(uri=uri)
    model = await kb.from_csv(str(path))
    assert model.get_schema()["title"] == "People"
    assert [row.get_json() for row in await kb.getall(table_name="People")] == [
        {"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    kb.close()


class Note(DataModel):
    id: str
    tags: list[str] = []
    meta: dict = {}
    day: datetime.date | None = None


async def test_lists_objects_and_dates_round_trip(uri: str) -> None:
    kb = KnowledgeBase(uri=uri, data_models=[Note])
    note = Note(id="n1", tags=["a", "b"], meta={"k": 1, "nested": {"x": True}}, day=datetime.date(2026, 1, 31))
    await kb.update(note)
    assert (await kb.get("n1", table_name="Note")).get_json() == {
        "id": "n1", "tags": ["a", "b"], "meta": {"k": 1, "nested": {"x": True}}, "day": "2026-01-31"}
    kb.close()


async def test_what_both_refuse_alike(uri: str, tmp_path: Path) -> None:
    kb = KnowledgeBase(uri=uri, data_models=[Article])
    with pytest.raises(ValueError, match="requires an embedding model"):
        await kb.similarity_search("capital", table_name="Article")
    with pytest.raises(KnowledgeBaseError, match="no table 'Missing'"):
        await kb.regex_search("x", table_name="Missing")
    kb.close()
    (await filled(uri)).close()
    wiped = KnowledgeBase(uri=uri, data_models=[Article], wipe_on_start=True)
    assert await wiped.count(table_name="Article") == 0
    wiped.close()


async def test_loading_json_lines(uri: str, tmp_path: Path) -> None:
    path = tmp_path / "people.jsonl"
    path.write_text('{"name": "ada", "born": 1815}\n{"name": "alan", "born": 1912}\n')
    kb = KnowledgeBase(uri=uri)
    await kb.from_jsonl(str(path))
    assert [row.get_json() for row in await kb.getall(table_name="People")] == [
        {"name": "ada", "born": 1815}, {"name": "alan", "born": 1912}]
    kb.close()


async def test_two_knowledge_bases_on_one_store_see_each_others_writes(uri: str) -> None:
    reader = KnowledgeBase(uri=uri)
    writer = await filled(uri)
    assert [model.get_schema()["title"] for model in reader.get_symbolic_data_models()] == ["Article"]
    assert await reader.count(table_name="Article") == 6
    assert [row["id"] for row in await reader.regex_search("Rome", table_name="Article")] == ["a5"]
    writer.close()
    reader.close()


async def test_ingesting_files_resumes_and_replaces_old_chunks(uri: str, tmp_path: Path) -> None:
    from promptgym.knowledge_bases.ingest import ingest

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Paris\n\nParis is the capital of France.\n")
    (docs / "b.md").write_text("# Cats\n\nCats sleep most of the day.\n")
    kb = KnowledgeBase(uri=uri, embedding_model=HashEmbeddingModel(dimensions=32))
    first = await ingest(kb, [docs])
    again = await ingest(kb, [docs])
    assert (first.added, again.added, again.already_stored) == (2, 0, 2)
    (docs / "a.md").write_text("# Rome\n\nRome is the capital of Italy.\n")
    await ingest(kb, [docs])
    texts = sorted(row.get_json()["text"] for row in await kb.getall(table_name="Chunk"))
    assert len(texts) == 2 and any("Rome" in text for text in texts) and not any("Paris" in text for text in texts)
    assert [row["source"].endswith("a.md") for row in await kb.hybrid_fts_search("Rome Italy", table_name="Chunk",
                                                                                  k=1)] == [True]
    kb.close()


class Passage(DataModel):
    id: str
    text: str
    embedding: list[float] = []  # synalinks' models declare the vector with an empty default


async def test_an_empty_embedding_field_means_no_vector_yet(uri: str) -> None:
    plain = KnowledgeBase(uri=uri, data_models=[Passage])
    assert await plain.update(Passage(id="p1", text="cats sleep")) == "p1"
    assert await plain.similarity_search(table_name="Passage", vector_or_vectors=[1.0, 0.0]) == []
    await plain.update(Passage(id="p2", text="dogs bark", embedding=[1.0, 0.0]))
    found = await plain.similarity_search(table_name="Passage", vector_or_vectors=[1.0, 0.0])
    assert [(row["id"], row["score"]) for row in found] == [("p2", 0.0)]
    with pytest.raises(ValueError, match="Primary key 'id' is required"):
        await plain.update(JsonDataModel(json={"text": "no key"}, schema=Passage.get_schema()))
    plain.close()


@pytest.mark.parametrize(("metric", "want"), [("l2sq", {"A": 0.0, "C": 2.0, "B": 9.0}),
                                              ("cosine", {"A": 0.0, "B": 0.42265, "C": 1.0}),
                                              ("ip", {"A": -1.0, "B": -2.0, "C": 0.0})])
async def test_every_metric_scores_in_the_same_units(uri: str, metric: str, want: dict[str, float]) -> None:
    kb = KnowledgeBase(uri=uri, data_models=[Passage], metric=metric)
    await kb.update([Passage(id="A", text="a", embedding=[1.0, 0.0, 0.0]),
                     Passage(id="B", text="b", embedding=[2.0, 2.0, 2.0]),
                     Passage(id="C", text="c", embedding=[0.0, 1.0, 0.0])])
    found = await kb.similarity_search(table_name="Passage", vector_or_vectors=[1.0, 0.0, 0.0], k=3)
    assert {row["id"]: round(row["score"], 5) for row in found} == want
    assert [row["id"] for row in found] == sorted(want, key=want.__getitem__)
    kb.close()


async def test_bm25_scores_span_zero_to_one_in_the_same_order(uri: str) -> None:
    kb = KnowledgeBase(uri=uri, data_models=[Passage])
    await kb.update([Passage(id="D1", text="the quick brown fox jumps"),
                     Passage(id="D2", text="the fox the fox the fox runs fast"),
                     Passage(id="D3", text="a lazy dog sleeps all day"),
                     Passage(id="D4", text="quick quick rabbits hop")])
    ranked = await kb.fulltext_search("quick fox", table_name="Passage", k=5)
    assert [row["id"] for row in ranked] == ["D1", "D2", "D4"]
    assert (ranked[0]["score"], ranked[-1]["score"]) == (1.0, 0.0)
    kb.close()


def test_a_writer_killed_mid_write_loses_only_that_write(uri: str) -> None:
    # The child writes batches of 10 and says so after each commit; it is SIGKILLed while writing more.
    script = textwrap.dedent(f"""
        import asyncio, sys
        from promptgym.knowledge_bases import KnowledgeBase
        from tests.knowledge_bases.test_adapter_parity import Article
        async def main():
            kb = KnowledgeBase(uri={uri!r}, data_models=[Article])
            for batch in range(10_000):
                await kb.update([Article(id=f"k{{batch:05d}}-{{i}}", title="t", body="b " * 200, source="s", year=i)
                                 for i in range(10)])
                print(batch + 1, flush=True)
        asyncio.run(main())
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    committed = 0
    while committed < 3:
        committed = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    kb = KnowledgeBase(uri=uri, data_models=[Article])
    stored = asyncio.run(kb.count(table_name="Article"))
    assert stored % 10 == 0 and stored >= 10 * committed
    assert len(asyncio.run(kb.getall(table_name="Article", limit=stored))) == stored
    kb.close()


async def test_the_retrievers_find_the_same_rows(uri: str) -> None:
    import promptgym as synalinks
    from promptgym.testing import ScriptedLanguageModel

    queries = {"similarity_search": ["capital of France"], "fulltext_search": ["capital"],
               "regex_search": "capital of (France|Italy)", "keywords": ["capital"],
               "regex_patterns": ["capital of (France|Italy)"]}

    def writes(request: Any) -> dict[str, Any]:  # the scripted LM fills in the query fields it is asked for
        return {field: queries[field] for field in request.schema["properties"]}

    kb = await filled(uri)
    found = {}
    for name in ("SimilaritySearch", "FullTextSearch", "RegexSearch", "HybridFTSSearch", "HybridRegexSearch"):
        retriever = getattr(synalinks, name)(knowledge_base=kb, language_model=ScriptedLanguageModel(respond=writes),
                                             data_model=Article, k=2)
        result = await retriever(Article(id="q", title="q", body="which city is the capital?", source="", year=0))
        found[name] = [row["id"] for row in result.get("result")]
    assert found == {"SimilaritySearch": ["a1", "a5"], "FullTextSearch": ["a1", "a2"], "RegexSearch": ["a1", "a5"],
                     "HybridFTSSearch": ["a1", "a2"], "HybridRegexSearch": ["a1", "a5"]}
    kb.close()
