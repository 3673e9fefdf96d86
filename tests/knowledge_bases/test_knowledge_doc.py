"""docs/knowledge.md's RAG program runs as written (a scripted LM and a hashing embedder stand in for the models)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import promptgym
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json

DOC = Path(__file__).resolve().parents[2] / "docs" / "knowledge.md"


def test_the_rag_program_of_the_guide_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    block = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL).group(1)

    def respond(request):
        user = last_user_json(request)
        if "result" in user:
            return {"answer": user["result"][0]["text"].split()[0]}
        return {"tables": ["Document"], "search": [user["question"].rstrip("?").split()[-1]]}  # "Canada"

    monkeypatch.setattr(promptgym, "LanguageModel", lambda model, **kw: ScriptedLanguageModel(respond=respond))
    monkeypatch.setattr(promptgym, "EmbeddingModel", lambda model, **kw: HashEmbeddingModel(dimensions=64))
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(DOC), "exec"), {"__name__": "__main__"})
    assert "Ottawa" in capsys.readouterr().out
    assert (tmp_path / "docs.db").is_file()
