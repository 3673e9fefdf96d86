"""``promptgym export-prompt`` opens a RAG program's knowledge base read-only, as ``serve`` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import promptgym as pg
from promptgym.cli.commands import export_prompt
from promptgym.cli.main import app as cli
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel
from tests.support import Answer, Document
from tests.support import Question as Query


async def test_export_prompt_loads_the_knowledge_base_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = pg.KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Document],
                          embedding_model=HashEmbeddingModel(dimensions=16))
    await kb.update(Document(id="1", text="Paris is the capital of France"))
    lm = ScriptedLanguageModel(responses=[{}])
    program = pg.Sequential([pg.Input(data_model=Query),
                             pg.RetrieveKnowledge(knowledge_base=kb, language_model=lm, k=1, name="retriever"),
                             pg.Generator(data_model=Answer, language_model=lm, name="answerer")], name="rag")
    program.save(str(tmp_path / "rag.json"))
    kb.close()
    seen = []
    real = export_prompt.export_prompts

    def spy(loaded: pg.Program) -> list:
        seen.append(loaded.get_module("retriever").knowledge_base)
        return real(loaded)

    monkeypatch.setattr(export_prompt, "export_prompts", spy)
    result = CliRunner().invoke(cli, ["export-prompt", str(tmp_path / "rag.json"), "--format", "messages"])
    assert result.exit_code == 0, result.output
    assert seen and seen[0].adapter.read_only and seen[0].read_only
    with pytest.raises(ValueError, match="read_only"):
        await seen[0].update(Document(id="2", text="Rome is the capital of Italy"))
