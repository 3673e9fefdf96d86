"""What only the LanceDB adapter has to say: the extra it needs, and what LanceDB cannot do (each a clear error)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from promptgym import DataModel
from promptgym.knowledge_bases import KnowledgeBase, KnowledgeBaseError, ReadOnlyKnowledgeBaseError


class Note(DataModel):
    id: str
    text: str


def test_without_the_extra_a_lancedb_uri_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lancedb", None)  # import lancedb now raises ImportError
    with pytest.raises(ImportError, match=r"the `lancedb` extra: pip install 'promptgym\[lancedb\]'"):
        KnowledgeBase(uri=f"lancedb://{tmp_path / 'kb'}", data_models=[Note])
    assert type(KnowledgeBase(uri=str(tmp_path / "kb.db")).adapter).__name__ == "DuckDBAdapter"


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    pytest.importorskip("lancedb")
    return KnowledgeBase(uri=f"lancedb://{tmp_path / 'kb'}", data_models=[Note])


async def test_what_lancedb_cannot_do_says_so(kb: KnowledgeBase, tmp_path: Path) -> None:
    await kb.update(Note(id="1", text="hello world"))
    with pytest.raises(NotImplementedError, match="cannot rename a table"):
        await kb.rename("Note", table_name="Memo")
    renamed = await kb.rename("Note", table_description="short notes")
    assert renamed.get_schema()["description"] == "short notes"
    with pytest.raises(NotImplementedError, match="bm25_b="):
        await kb.fulltext_search("hello", table_name="Note", bm25_b=0.5)
    with pytest.raises(NotImplementedError, match="no SQL engine"):
        await kb.sql("DELETE FROM Note", read_only=False)
    with pytest.raises(NotImplementedError, match="encryption_key="):
        KnowledgeBase(uri=f"lancedb://{tmp_path / 'other'}", encryption_key="secret")
    with pytest.raises(NotImplementedError, match="no 'hindi' stemmer"):
        await KnowledgeBase(uri=kb.uri, stemmer="hindi").fulltext_search("hello", table_name="Note")
    kb.close()


async def test_read_only_refuses_writes_and_searches_what_was_indexed(kb: KnowledgeBase) -> None:
    await kb.update([Note(id="1", text="hello world"), Note(id="2", text="goodbye moon")])
    assert await kb.adapter.refresh_fulltext_index(table_name="Note") is True
    kb.close()
    reader = KnowledgeBase(uri=kb.uri, read_only=True)
    assert [row["id"] for row in await reader.fulltext_search("moon", table_name="Note")] == ["2"]
    with pytest.raises(ReadOnlyKnowledgeBaseError):
        await reader.update(Note(id="3", text="x"))
    with pytest.raises(KnowledgeBaseError, match="no such directory"):
        KnowledgeBase(uri=kb.uri + "-missing", read_only=True)


async def test_sql_reads_but_may_not_touch_the_host(kb: KnowledgeBase) -> None:
    await kb.update(Note(id="1", text="hello"))
    assert await kb.sql("SELECT id, text FROM Note", output_format="csv") == '"id","text"\n"1","hello"\n'
    with pytest.raises(Exception, match="SELECT"):
        await kb.sql("DROP TABLE Note")
    with pytest.raises(Exception, match="(?i)external|disabled|permission"):
        await kb.sql("SELECT * FROM read_csv('/etc/passwd')")


def test_nothing_downloads_at_run_time_with_the_network_cut(tmp_path: Path) -> None:
    """LanceDB is Rust underneath (a socket patch would not see it): the child runs in a namespace with no network."""
    pytest.importorskip("lancedb")
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode:
        pytest.skip("no user namespaces here to cut the network with")
    script = textwrap.dedent(f"""
        import asyncio
        from promptgym.knowledge_bases import KnowledgeBase
        from promptgym.testing import HashEmbeddingModel
        from tests.knowledge_bases.test_lancedb_adapter import Note
        async def main():
            kb = KnowledgeBase(uri={f"lancedb://{tmp_path / 'kb'}"!r}, data_models=[Note],
                               embedding_model=HashEmbeddingModel(dimensions=16))
            await kb.update([Note(id="1", text="quick fox"), Note(id="2", text="slow dog")])
            assert [row["id"] for row in await kb.fulltext_search("fox", table_name="Note")] == ["1"]
            assert [row["id"] for row in await kb.hybrid_fts_search("slow dog", table_name="Note", k=1)] == ["2"]
            print("ok")
        asyncio.run(main())
    """)
    done = subprocess.run(["unshare", "-rn", sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
