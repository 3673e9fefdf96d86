"""The README's Quick start runs as pasted (against the scripted model instead of the embedded one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import promptgym
from promptgym.testing import ScriptedLanguageModel, last_user_json

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start() -> str:
    """The first Python block under '## Quick start'."""
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "no ```python block under ## Quick start"
    return found.group(1)


def test_the_quick_start_is_a_complete_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    models: list[ScriptedLanguageModel] = []

    def scripted(model: str, **options):  # the README's model string, answered by a script
        assert model.startswith("local/")
        capitals = {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Egypt": "Cairo", "Peru": "Lima",
                    "Kenya": "Nairobi", "Canada": "Ottawa", "Norway": "Oslo", "Chile": "Santiago", "Spain": "Madrid",
                    "Greece": "Athens", "Cuba": "Havana"}

        def respond(request):
            country = last_user_json(request)["question"].removeprefix("What is the capital of ").rstrip("?")
            return {"answer": capitals.get(country, "?")}

        models.append(ScriptedLanguageModel(respond=respond, **options))
        return models[-1]

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(promptgym, "LanguageModel", scripted)
    exec(compile(quick_start(), "README.md (Quick start)", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert "'reward': 1.0" in printed and "'f1_score': 1.0" in printed  # the test split, evaluated
    assert (tmp_path / "trained.json").is_file() and models and models[0].requests
