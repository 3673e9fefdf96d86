"""``promptgym serve`` opens a served program's knowledge base read-only: it answers from it, can't write it,
and another process can read the file alongside."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

import promptgym as pg
from promptgym.knowledge_bases import KnowledgeBase
from promptgym.knowledge_bases.ingest import ingest
from promptgym.serving import ServeSettings, create_app, load_programs
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel
from tests.serving.programs import Answer, Question

FAKE_EMBEDDER = {"class_name": "HashEmbeddingModel", "config": {"model": "local/multilingual-e5-small",
                                                                "dimensions": 32}}


class Note(pg.DataModel):
    id: str
    text: str


def built_knowledge_base(folder: Path) -> KnowledgeBase:
    docs = folder / "docs"
    docs.mkdir()
    (docs / "zorp.txt").write_text("The creature called zorp is blue.", encoding="utf-8")
    (docs / "mabel.txt").write_text("The creature called mabel is green.", encoding="utf-8")
    kb = KnowledgeBase(uri=str(folder / "kb.db"), embedding_model=HashEmbeddingModel(dimensions=32))
    kb.adapter.set_setting("embedding_model", json.dumps(FAKE_EMBEDDER))
    asyncio.run(ingest(kb, [docs]))
    return kb


def save_programs(folder: Path) -> tuple[Path, Path]:
    kb = built_knowledge_base(folder)
    lm = ScriptedLanguageModel(responses=[{"tables": ["Chunk"], "search": ["mabel"]}, {"answer": "green"}])
    inputs = pg.Input(data_model=Question)
    found = asyncio.run(pg.RetrieveKnowledge(knowledge_base=kb, language_model=lm, search_type="hybrid_fts", k=1,
                                             name="retriever")(inputs))
    answer = asyncio.run(pg.Generator(data_model=Answer, language_model=lm, name="answerer")(found))
    rag = folder / "rag.json"
    pg.Program(inputs=inputs, outputs=answer, name="rag").save(str(rag))
    note = pg.Input(data_model=Note)
    stored = asyncio.run(pg.UpdateKnowledge(knowledge_base=kb, name="store")(note))
    writer = folder / "writer.json"
    pg.Program(inputs=note, outputs=stored, name="writer").save(str(writer))
    kb.close()
    return rag, writer


def test_a_served_program_reads_its_knowledge_base_and_cannot_write_it(tmp_path: Path) -> None:
    rag, writer = save_programs(tmp_path)
    before = (tmp_path / "kb.db").stat().st_mtime_ns
    served = load_programs([rag, writer])
    modules = [module for entry in served.values() for module in entry.program._flatten_modules()
               if hasattr(module, "knowledge_base")]
    assert modules and all(module.knowledge_base.adapter.read_only for module in modules)
    client = TestClient(create_app(list(served.values()), settings=ServeSettings()))
    answered = client.post("/v1/programs/rag/predict", json={"question": "what colour is mabel?"})
    assert answered.status_code == 200, answered.text
    assert answered.json()["answer"] == "green"
    refused = client.post("/v1/programs/writer/predict", json={"id": "n1", "text": "a new note"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "read_only_knowledge_base" and "read_only=True" in error["message"]
    # While the server holds the file, another process searches it (DuckDB: many readers, or one writer).
    search = subprocess.run([sys.executable, "-c", "import promptgym.testing; from promptgym.cli.main import main; main()", "kb", "search",
                             str(tmp_path / "kb.db"), "mabel", "--type", "fulltext", "--json"],
                            capture_output=True, text=True, timeout=120)
    assert search.returncode == 0, search.stdout + search.stderr
    assert json.loads(search.stdout.splitlines()[0])["source"].endswith("mabel.txt")
    for entry in served.values():
        for module in entry.program._flatten_modules():
            if hasattr(module, "knowledge_base"):
                module.knowledge_base.close()
    assert (tmp_path / "kb.db").stat().st_mtime_ns == before  # nothing was written
    again = KnowledgeBase(uri=str(tmp_path / "kb.db"))
    assert asyncio.run(again.count(table_name="Note")) == 0 and asyncio.run(again.count(table_name="Chunk")) == 2
    again.close()


def test_a_served_search_that_needs_an_index_the_file_lacks_is_a_clear_error(tmp_path: Path) -> None:
    kb = KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Note])
    asyncio.run(kb.update([Note(id="1", text="zorp is blue")]))  # written, never searched: no BM25 index yet
    lm = ScriptedLanguageModel(responses=[{"tables": ["Note"], "search": ["zorp"]}, {"answer": "blue"}])
    inputs = pg.Input(data_model=Question)
    found = asyncio.run(pg.RetrieveKnowledge(knowledge_base=kb, language_model=lm, search_type="fulltext",
                                             name="retriever")(inputs))
    answer = asyncio.run(pg.Generator(data_model=Answer, language_model=lm, name="answerer")(found))
    pg.Program(inputs=inputs, outputs=answer, name="rag").save(str(tmp_path / "rag.json"))
    kb.close()
    served = load_programs([tmp_path / "rag.json"])
    client = TestClient(create_app(list(served.values()), settings=ServeSettings()))
    refused = client.post("/v1/programs/rag/predict", json={"question": "zorp?"})
    assert refused.status_code == 409, refused.text
    assert "no full-text index yet" in refused.json()["error"]["message"]
    assert "refresh_fulltext_index" in refused.json()["error"]["message"]
    for module in served["rag"].program._flatten_modules():
        if hasattr(module, "knowledge_base"):
            module.knowledge_base.close()
    writable = KnowledgeBase(uri=str(tmp_path / "kb.db"))
    assert asyncio.run(writable.adapter.refresh_fulltext_index(table_name="Note")) is True
    writable.close()
    served = load_programs([tmp_path / "rag.json"])
    client = TestClient(create_app(list(served.values()), settings=ServeSettings()))
    assert client.post("/v1/programs/rag/predict", json={"question": "zorp?"}).json()["answer"] == "blue"
