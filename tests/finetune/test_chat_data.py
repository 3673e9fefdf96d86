"""Every row is checked before training; problems name the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptgym.finetune.chat_data import ChatDataError, read_chat_jsonl

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_each_kind_of_problem_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "train.jsonl", [
        json.dumps(GOOD),
        "{not json",
        json.dumps({"messages": [{"role": "bot", "content": "x"}, {"role": "assistant", "content": "y"}]}),
        json.dumps({"messages": [{"role": "user", "content": "only a question"}]}),
        json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  "}]}),
        json.dumps({"text": "neither format"}),
        json.dumps({"prompt": "2+2?", "completion": "4"}),
    ])
    rows, problems = read_chat_jsonl(path)
    assert [row.line for row in rows] == [1, 7]
    assert rows[1].messages == ({"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"})
    messages = {problem.line: problem.message for problem in problems}
    assert sorted(messages) == [2, 3, 4, 5, 6]
    assert messages[2].startswith("bad JSON")
    assert "unknown role 'bot' in messages[0]" in messages[3]
    assert "no assistant turn" in messages[4]
    assert "messages[1] (assistant): empty content" in messages[5]
    assert "expected" in messages[6] and "['text']" in messages[6]
    assert str(problems[0]) == f"{path}:2: {messages[2]}"


def test_the_first_twenty_problems_then_a_count(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.jsonl", ["{"] * 25)
    _, problems = read_chat_jsonl(path)
    message = str(ChatDataError(problems))
    assert message.count("bad JSON") == 20 and "... and 5 more problem(s)" in message
    assert f"{path}:25:" not in message and f"{path}:20:" in message


def test_limit_keeps_the_first_rows_and_a_missing_file_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "train.jsonl", [json.dumps(GOOD)] * 5)
    rows, _ = read_chat_jsonl(path, limit=3)
    assert len(rows) == 3
    with pytest.raises(ChatDataError, match="absent.jsonl: no such file"):
        read_chat_jsonl(tmp_path / "absent.jsonl")
