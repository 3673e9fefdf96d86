"""Loading text, Markdown, HTML and PDF into chunks with their place; ingestion that resumes after a kill."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from promptgym.knowledge_bases import KnowledgeBase
from promptgym.knowledge_bases.documents import DocumentError, chunk_file, chunk_id, document_texts
from promptgym.knowledge_bases.ingest import ingest
from promptgym.testing import HashEmbeddingModel

from .pdfs import write_blank_pdf, write_text_pdf

PARAGRAPH = "Foxes are small omnivores. They live in forests and towns. "


def corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text(PARAGRAPH * 30, encoding="utf-8")
    (docs / "guide.md").write_text("# Dogs\n\n" + "Dogs are loyal companions. " * 20 + "\n\n## Cats\n\n"
                                   + "Cats sleep a lot. " * 20, encoding="utf-8")
    (docs / "page.html").write_text("<html><head><style>p {color: red}</style><script>var x = 1;</script></head>"
                                    "<body><nav>Menu</nav><p>Owls hunt at night.</p><p>Owls are birds.</p></body></html>",
                                    encoding="utf-8")
    write_text_pdf(docs / "paper.pdf", ["Penguins cannot fly.", "Penguins swim very well."])
    return docs


def test_chunks_record_source_position_and_offsets(tmp_path: Path) -> None:
    docs = corpus(tmp_path)
    text = (docs / "notes.txt").read_text()
    chunks = chunk_file(docs / "notes.txt", chunk_size=300, overlap=50)
    assert len(chunks) > 3 and [chunk.position for chunk in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert len(chunk.text) <= 300 and text[chunk.start:chunk.end] == chunk.text and chunk.page is None
        assert chunk.id == chunk_id(str(docs / "notes.txt"), chunk.position, chunk.text)
    assert chunks[1].start < chunks[0].end  # neighbours overlap
    assert chunk_file(docs / "notes.txt", chunk_size=300, overlap=50) == chunks  # same file, same ids


def test_html_pdf_and_markdown_give_their_text(tmp_path: Path) -> None:
    docs = corpus(tmp_path)
    assert document_texts(docs / "page.html") == [(None, "Owls hunt at night.\nOwls are birds.")]
    pdf = chunk_file(docs / "paper.pdf")
    assert [(chunk.page, chunk.position, chunk.text) for chunk in pdf] == [
        (1, 0, "Penguins cannot fly."), (2, 1, "Penguins swim very well.")]
    markdown = chunk_file(docs / "guide.md", chunk_size=200, overlap=0)
    assert any(chunk.text.startswith("## Cats") for chunk in markdown)  # cut at the heading, not mid-sentence


def test_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "latin.txt").write_bytes("café crème".encode("latin-1"))
    write_blank_pdf(tmp_path / "scan.pdf")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 nothing else")
    with pytest.raises(DocumentError, match="binary file"):
        document_texts(tmp_path / "image.txt")
    with pytest.raises(DocumentError, match="not UTF-8 text .byte 3 is 0xe9"):
        document_texts(tmp_path / "latin.txt")
    with pytest.raises(DocumentError, match="no extractable text .2 pages"):
        document_texts(tmp_path / "scan.pdf")
    with pytest.raises(DocumentError, match="not a readable PDF"):
        document_texts(tmp_path / "broken.pdf")
    with pytest.raises(DocumentError, match="more than the 0 MB limit"):
        document_texts(tmp_path / "latin.txt", max_bytes=5)


async def test_ingest_stores_every_chunk_once_and_searches(tmp_path: Path) -> None:
    docs = corpus(tmp_path)
    (docs / "bad.txt").write_bytes(b"\xff\xfe\x00\x00binary")
    kb = KnowledgeBase(uri=str(tmp_path / "kb.db"), embedding_model=HashEmbeddingModel(dimensions=64))
    report = await ingest(kb, [docs], chunk_size=300, overlap=30, batch_size=4, root=docs)
    assert report.files == 4 and report.added == report.chunks and report.already_stored == 0
    assert [source for source, _ in report.failed] == ["bad.txt"] and "binary" in report.failed[0][1]
    assert await kb.count(table_name="Chunk") == report.chunks
    again = await ingest(kb, [docs], chunk_size=300, overlap=30, batch_size=4, root=docs)
    assert (again.added, again.already_stored) == (0, report.chunks)
    hits = await kb.hybrid_fts_search("penguins swim", table_name="Chunk", k=2)
    assert (hits[0]["source"], hits[0]["page"]) == ("paper.pdf", 2)
    (docs / "page.html").write_text("<p>Owls are quiet.</p>", encoding="utf-8")  # an edited file replaces its chunks
    edited = await ingest(kb, [docs / "page.html"], root=docs)
    assert (edited.added, edited.removed) == (1, 1)
    assert [r.get("text") for r in await kb.getall(table_name="Chunk", filters={"source": "page.html"})] \
        == ["Owls are quiet."]


def test_ingestion_killed_mid_way_resumes_without_duplicates(tmp_path: Path) -> None:
    docs = corpus(tmp_path)
    database = tmp_path / "kb.db"
    # The child process SIGKILLs itself while embedding its third batch: a real kill, at a known point.
    script = textwrap.dedent(f"""
        import asyncio, os, signal
        from promptgym.knowledge_bases import KnowledgeBase
        from promptgym.knowledge_bases.ingest import ingest
        from promptgym.testing import HashEmbeddingModel
        embed = HashEmbeddingModel._embed
        async def dying(self, texts):
            if self.calls == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return await embed(self, texts)
        HashEmbeddingModel._embed = dying
        kb = KnowledgeBase(uri={str(database)!r}, embedding_model=HashEmbeddingModel(dimensions=64))
        asyncio.run(ingest(kb, [{str(docs)!r}], chunk_size=300, overlap=30, batch_size=4, root={str(docs)!r}))
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import asyncio, json
        from promptgym.knowledge_bases import KnowledgeBase
        from promptgym.knowledge_bases.ingest import ingest
        from promptgym.testing import HashEmbeddingModel
        async def main():
            kb = KnowledgeBase(uri={str(database)!r}, embedding_model=HashEmbeddingModel(dimensions=64))
            before = await kb.count(table_name="Chunk")
            report = await ingest(kb, [{str(docs)!r}], chunk_size=300, overlap=30, batch_size=4, root={str(docs)!r})
            rows = await kb.sql("SELECT count(*) AS n, count(DISTINCT source || '#' || position) AS places FROM Chunk")
            print(json.dumps([before, report.chunks, report.already_stored, report.added, rows[0]]))
        asyncio.run(main())
    """)], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    before, total, already, added, rows = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert 0 < before < total  # the two batches committed before the kill survived it, the third is not there
    assert (already, added) == (before, total - before)
    assert rows == {"n": total, "places": total}
