"""KnowledgeBase on DuckDB: storage by key, the four searches, filters, persistence, concurrency, bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest

from promptgym import DataModel, Field, JsonDataModel
from promptgym.knowledge_bases import KnowledgeBase, KnowledgeBaseError, connection, deserialize, get, serialize
from promptgym.testing import HashEmbeddingModel


class Doc(DataModel):
    id: str = Field(description="The key")
    text: str = Field(description="The content")
    source: str = Field(default="", description="Where it came from")


class Wider(DataModel):
    id: str
    text: str
    extra: int


DOCS = [Doc(id="a", text="the quick brown fox jumps", source="x.md"),
        Doc(id="b", text="a lazy dog sleeps all day", source="x.md"),
        Doc(id="c", text="clever animals are quick", source="y.md")]


def make(tmp_path: Path, **kwargs) -> KnowledgeBase:
    return KnowledgeBase(uri=f"duckdb://{tmp_path / 'kb.db'}", data_models=[Doc], **kwargs)


async def test_upsert_get_delete_by_primary_key(tmp_path: Path) -> None:
    kb = make(tmp_path)
    assert await kb.update([doc.to_json_data_model() for doc in DOCS]) == ["a", "b", "c"]
    assert await kb.update(Doc(id="a", text="replaced", source="z.md")) == "a"  # a DataModel instance works too
    assert (await kb.get("a", table_name="Doc")).get_json() == {"id": "a", "text": "replaced", "source": "z.md"}
    assert [None if r is None else r.get("id") for r in await kb.get(["c", "nope"], table_name="Doc")] == ["c", None]
    assert await kb.count(table_name="Doc") == 3
    assert await kb.delete(["a", "ghost"], table_name="Doc") == 1
    assert [r.get("id") for r in await kb.getall(table_name="Doc")] == ["b", "c"]


async def test_fulltext_search_ranks_by_bm25_and_follows_writes(tmp_path: Path) -> None:
    kb = make(tmp_path)
    await kb.update(list(DOCS))
    rows = await kb.fulltext_search("quick fox", table_name="Doc", k=5)
    assert [row["id"] for row in rows] == ["a", "c"]
    assert rows[0]["score"] == 1.0 and 0.0 <= rows[-1]["score"] < 1.0
    await kb.delete("a", table_name="Doc")  # the index is rebuilt before the next search: no ghost
    assert [row["id"] for row in await kb.fulltext_search("quick", table_name="Doc")] == ["c"]
    await kb.update(Doc(id="d", text="a quick quick quick note"))
    assert {row["id"] for row in await kb.fulltext_search("quick", table_name="Doc")} == {"c", "d"}


async def test_vector_and_hybrid_search_with_an_embedder(tmp_path: Path) -> None:
    embedder = HashEmbeddingModel(dimensions=64)
    kb = make(tmp_path, embedding_model=embedder)
    await kb.update(list(DOCS))  # embedded on the way in: no embedding field given
    rows = await kb.similarity_search("lazy dog sleeps", table_name="Doc", k=2)
    assert rows[0]["id"] == "b" and rows[0]["score"] < rows[1]["score"]
    assert "embedding" not in rows[0]
    hybrid = await kb.hybrid_fts_search("quick fox", table_name="Doc", k=3)
    assert [row["id"] for row in hybrid][:2] == ["a", "c"]
    given = await kb.similarity_search(table_name="Doc", vector_or_vectors=(await embedder(["a lazy dog"]))[0].tolist())
    assert given[0]["id"] == "b"


async def test_filters_restrict_every_search(tmp_path: Path) -> None:
    kb = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=64))
    await kb.update(list(DOCS))
    assert [r["id"] for r in await kb.fulltext_search("quick", table_name="Doc", filters={"source": "y.md"})] == ["c"]
    assert {r["id"] for r in await kb.similarity_search("fox", table_name="Doc", filters={"source": ["x.md"]})} \
        == {"a", "b"}
    assert [r["id"] for r in await kb.regex_search("qu.ck", table_name="Doc", filters={"source": "x.md"})] == ["a"]
    assert [r.get("id") for r in await kb.getall(table_name="Doc", filters={"source": "y.md"})] == ["c"]
    with pytest.raises(ValueError, match="no field 'author'"):
        await kb.fulltext_search("quick", table_name="Doc", filters={"author": "me"})


async def test_persisted_on_disk_and_reopened(tmp_path: Path) -> None:
    kb = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=64))
    await kb.update(list(DOCS))
    kb.close()
    again = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=64))
    assert (await again.get("c", table_name="Doc")).get("text") == "clever animals are quick"
    assert (await again.similarity_search("lazy dog", table_name="Doc", k=1))[0]["id"] == "b"


async def test_reopening_with_another_data_model_names_both(tmp_path: Path) -> None:
    make(tmp_path).close()
    with pytest.raises(KnowledgeBaseError) as error:
        KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[_titled(Wider, "Doc")])
    message = str(error.value)
    assert "table 'Doc'" in message and "source: VARCHAR" in message and "extra: BIGINT" in message


def _titled(model: type[DataModel], title: str) -> JsonDataModel:
    schema = model.get_schema()
    schema["title"] = title
    return JsonDataModel(json={}, schema=schema)


async def test_reopening_with_another_embedding_dimension_names_both(tmp_path: Path) -> None:
    kb = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=64))
    await kb.update(list(DOCS))
    kb.close()
    other = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=32))
    with pytest.raises(KnowledgeBaseError) as error:
        await other.similarity_search("fox", table_name="Doc")
    assert "64-dimensional" in str(error.value) and "32-dimensional" in str(error.value)
    with pytest.raises(KnowledgeBaseError, match="64-dimensional"):
        await other.update(Doc(id="z", text="new"))
    assert await other.count(table_name="Doc") == 3  # the refused write changed nothing


async def test_many_coroutines_read_and_write_at_once(tmp_path: Path) -> None:
    kb = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=32))

    async def writer(index: int) -> None:
        await kb.update(Doc(id=f"d{index}", text=f"note number {index} about foxes"))

    async def reader() -> int:
        return len(await kb.hybrid_fts_search("foxes", table_name="Doc", k=100))

    results = await asyncio.gather(*[writer(i) for i in range(40)], *[reader() for _ in range(20)])
    assert all(isinstance(count, int) for count in results[40:])
    assert await kb.count(table_name="Doc") == 40
    assert len(await kb.fulltext_search("foxes", table_name="Doc", k=100)) == 40


def test_extensions_load_from_the_pip_packages_with_downloads_off(tmp_path: Path) -> None:
    """fts and vss come from duckdb-ext-*: with auto-install and auto-load off, search still works."""
    script = textwrap.dedent(f"""
        import asyncio, duckdb, socket
        def no_network(*args, **kwargs):
            raise OSError("network is off in this test")
        socket.socket.connect = no_network
        socket.create_connection = no_network
        from promptgym.knowledge_bases import extensions
        assert extensions.connection_config()["autoinstall_known_extensions"] is False
        from promptgym.knowledge_bases import KnowledgeBase
        from promptgym.testing import HashEmbeddingModel
        from promptgym import DataModel
        class Doc(DataModel):
            id: str
            text: str
        async def main():
            kb = KnowledgeBase(uri={str(tmp_path / 'net.db')!r}, data_models=[Doc],
                               embedding_model=HashEmbeddingModel(dimensions=16))
            await kb.update([Doc(id="1", text="quick fox"), Doc(id="2", text="slow dog")])
            probe = extensions.connect(":memory:")
            extensions.load_extensions(probe, ["fts", "vss"])
            loaded = probe.execute("SELECT extension_name, install_path FROM duckdb_extensions() "
                                   "WHERE loaded AND extension_name IN ('fts', 'vss') ORDER BY 1").fetchall()
            assert [name for name, _ in loaded] == ["fts", "vss"], loaded
            assert all("duckdb_ext" in path for _, path in loaded), loaded
            assert [r["id"] for r in await kb.fulltext_search("fox", table_name="Doc")] == ["1"]
            assert (await kb.similarity_search("slow dog", table_name="Doc", k=1))[0]["id"] == "2"
            print("ok")
        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_a_locked_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    make(tmp_path).close()
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, sys, time; c = duckdb.connect({str(path)!r}); "
                               "print('held', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(KnowledgeBaseError, match="locked by another process"):
            KnowledgeBase(uri=str(path), data_models=[Doc])
    finally:
        holder.kill()
        holder.wait()


def test_a_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    path.write_bytes(b"this is not a database" * 1000)
    with pytest.raises(KnowledgeBaseError, match="cannot be opened"):
        KnowledgeBase(uri=str(path), data_models=[Doc])


async def test_read_only_reader_searches_and_refuses_writes(tmp_path: Path) -> None:
    kb = make(tmp_path)
    await kb.update(list(DOCS))
    assert await kb.fulltext_search("fox", table_name="Doc")  # builds the index
    kb.close()
    reader = KnowledgeBase(uri=str(tmp_path / "kb.db"), read_only=True)
    assert [r["id"] for r in await reader.fulltext_search("lazy", table_name="Doc")] == ["b"]
    with pytest.raises(KnowledgeBaseError, match="read_only=True"):
        await reader.update(Doc(id="q", text="no"))


async def test_sql_is_select_only_and_cannot_read_files(tmp_path: Path) -> None:
    kb = make(tmp_path)
    await kb.update(list(DOCS))
    assert await kb.sql("SELECT count(*) AS n FROM Doc") == [{"n": 3}]
    with pytest.raises(duckdb.Error, match="only permits SELECT"):
        await kb.sql("DELETE FROM Doc")
    (tmp_path / "secret.csv").write_text("a\n1\n")
    with pytest.raises(duckdb.Error):
        await kb.sql(f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')")


async def test_config_round_trips_and_keeps_no_secret(tmp_path: Path) -> None:
    kb = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=8))
    clone = deserialize(serialize(kb))
    assert clone.get_config() == kb.get_config()
    assert get(serialize(kb)).get_symbolic_data_models()[0].get_schema()["title"] == "Doc"
    secret = KnowledgeBase(uri=str(tmp_path / "enc.db"), data_models=[Doc], encryption_key="s3cret")
    assert "s3cret" not in str(secret.get_config()) and "s3cret" not in repr(secret)


async def test_empty_knowledge_base_searches_return_nothing(tmp_path: Path) -> None:
    kb = make(tmp_path, embedding_model=HashEmbeddingModel(dimensions=8))
    assert await kb.fulltext_search("anything", table_name="Doc") == []
    assert await kb.similarity_search("anything", table_name="Doc") == []
    assert await kb.hybrid_fts_search("anything", table_name="Doc") == []
    with pytest.raises(KnowledgeBaseError, match="no table 'Missing'"):
        await kb.fulltext_search("x", table_name="Missing")


async def test_two_knowledge_bases_on_one_file_share_it(tmp_path: Path) -> None:
    """A key deleted through one and re-added through the other (a duplicate-key error with two connections)."""
    first, second = make(tmp_path), make(tmp_path)
    await first.update(list(DOCS))
    assert await second.delete("a", table_name="Doc") == 1
    await first.update(Doc(id="a", text="back again"))
    assert (await second.get("a", table_name="Doc")).get("text") == "back again"
    first.close()
    assert await second.count(table_name="Doc") == 3  # closing one leaves the other working


async def test_search_without_a_table_name_searches_every_table(tmp_path: Path) -> None:
    class Note(DataModel):
        key: str
        body: str

    kb = KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Doc, Note])
    await kb.update([*DOCS, Note(key="n1", body="a quick reminder")])
    assert {row.get("id", row.get("key")) for row in await kb.fulltext_search("quick", k=10)} == {"a", "c", "n1"}


@pytest.mark.parametrize("metric", ["cosine", "l2sq", "ip"])
async def test_vectors_in_memory_rank_as_the_database_does(tmp_path: Path, metric: str) -> None:
    """Unfiltered searches use a matrix in memory, filtered ones DuckDB's distance functions: same order, same scores."""
    import numpy as np

    rng = np.random.default_rng(0)
    kb = KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Doc], metric=metric)
    vectors = rng.standard_normal((50, 8))
    await kb.update([JsonDataModel(json={"id": f"d{i}", "text": "t", "source": "all", "embedding": vectors[i].tolist()},
                                   schema=Doc.get_schema()) for i in range(50)])
    query = rng.standard_normal(8).tolist()
    memory = await kb.similarity_search(table_name="Doc", vector_or_vectors=query, k=5)
    database = await kb.similarity_search(table_name="Doc", vector_or_vectors=query, k=5, filters={"source": "all"})
    assert [row["id"] for row in memory] == [row["id"] for row in database]
    assert [row["score"] for row in memory] == pytest.approx([row["score"] for row in database], abs=1e-4)
    await kb.delete(memory[0]["id"], table_name="Doc")  # a write drops the matrix: the deleted row is gone
    assert memory[0]["id"] not in [row["id"] for row in await kb.similarity_search(table_name="Doc",
                                                                                   vector_or_vectors=query, k=5)]


def test_an_adapter_collected_while_another_file_opens_does_not_deadlock(tmp_path, monkeypatch):
    """A forgotten knowledge base's ``__del__`` can run (garbage collection) inside the registry's critical
    section while another file opens; its release takes the registry's lock again, in the same thread."""
    forgotten = [KnowledgeBase(uri=str(tmp_path / "a.db"))]
    real = connection.open_connection

    def collecting(*args):
        forgotten.clear()  # the last reference: __del__ -> close -> release, as a collection would
        return real(*args)

    monkeypatch.setattr(connection, "open_connection", collecting)
    opened = threading.Event()

    def open_another():
        KnowledgeBase(uri=str(tmp_path / "b.db")).close()
        opened.set()

    threading.Thread(target=open_another, daemon=True).start()
    assert opened.wait(30), "opening b.db deadlocked on the registry's lock"
    assert not [key for key in connection._SHARED if str(tmp_path) in key]  # both files closed, a.db's too
