"""docs/agents.md's first example runs as pasted (the embedded model answered by a script)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import promptgym
from promptgym.modules.tool_calls import TOOL_RESULTS_PREFIX
from promptgym.testing import ScriptedLanguageModel

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def respond(request):
    last = request.messages[-1]["content"]
    if last.startswith(TOOL_RESULTS_PREFIX):
        result = json.loads(last[len(TOOL_RESULTS_PREFIX):])[0]["result"]["result"]
        return {"final_answer": {"final_answer": result}}
    return {"tool_calls": [{"tool_name": "calculate", "arguments": {"expression": "152648 + 485"}}]}


def test_the_calculator_example_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL).group(1)
    monkeypatch.setattr(promptgym, "LanguageModel", lambda model, **options: ScriptedLanguageModel(respond=respond))
    exec(compile(code, str(DOC), "exec"), {"__name__": "__main__"})
    printed = json.loads(capsys.readouterr().out)
    assert printed["final_answer"] == 153133.0
    assert printed["messages"][1]["content"] == {"result": 153133.0}
