"""``program.export_sft_data``: the Generators' own messages and the answers that earned the reward."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import promptgym as pg
from promptgym.testing import ScriptedLanguageModel, last_user_json


class Question(pg.DataModel):
    question: str = pg.Field(description="A word")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The word in upper case")


def program_with_demo() -> pg.Program:
    def respond(request):
        word = last_user_json(request)["question"]
        return {"answer": word.upper() if len(word) > 2 else "?"}  # wrong on short words

    generator = pg.Generator(data_model=Answer, language_model=ScriptedLanguageModel(respond=respond), name="upper",
                             instructions="Upper-case the word.", examples=[(Question(question="demo"), Answer(answer="DEMO"))])
    program = pg.Sequential([pg.Input(data_model=Question), generator], name="qa")
    program.compile(reward="exactmatch")
    return program


def data(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([Question(question=w) for w in words], dtype=object),
            np.array([Answer(answer=w.upper()) for w in words], dtype=object))


async def test_only_rewarded_runs_become_rows_without_their_demonstrations(tmp_path: Path) -> None:
    program = program_with_demo()
    x, y = data(["cat", "ox", "house"])
    report = await program.export_sft_data(x, y, str(tmp_path / "sft.jsonl"), min_reward=1.0)
    assert (report.rows, report.kept, report.below_reward, report.failed) == (2, 2, [1], {})
    assert report.rows_per_module == {"upper": 2}
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    generator = program.get_module("upper")
    first = rows[0]["messages"]
    sent = next(r.messages for r in generator.language_model.requests if '"cat"' in r.messages[-1]["content"])
    assert first[:-1] == [sent[0], sent[-1]]  # what the Generator sent (system prompt and input), minus the demo turns
    assert "A word" in first[0]["content"]  # the input field's description: the schema the Generator had, not a guess
    assert [m["role"] for m in first] == ["system", "user", "assistant"]
    assert json.loads(first[-1]["content"]) == {"answer": "CAT"}
    assert "Upper-case the word." in first[0]["content"]

    with_demos = await program.export_sft_data(x, y, str(tmp_path / "with.jsonl"), with_demonstrations=True)
    messages = json.loads((tmp_path / "with.jsonl").read_text().splitlines()[1])["messages"]
    sent = next(r.messages for r in generator.language_model.requests if '"house"' in r.messages[-1]["content"])
    assert messages[:-1] == sent and with_demos.rows == 2
    assert [m["content"] for m in messages[1:3]] == ['{"question": "demo"}', '{"answer": "DEMO"}']


async def test_the_written_rows_pass_the_fine_tuning_checks(tmp_path: Path) -> None:
    from promptgym.finetune.chat_data import read_chat_jsonl

    program = program_with_demo()
    x, y = data(["alpha", "beta", "gamma"])
    await program.export_sft_data(x, y, str(tmp_path / "sft.jsonl"), min_reward=0.5)
    rows, problems = read_chat_jsonl(tmp_path / "sft.jsonl")
    assert len(rows) == 3 and problems == []
