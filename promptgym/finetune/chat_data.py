"""Chat JSONL for fine-tuning: read every row, check it, and say exactly what is wrong and where.

    rows, problems = read_chat_jsonl("train.jsonl")
    problems[0]   # DataProblem(file='train.jsonl', line=7, message="unknown role 'bot' in messages[1] ...")

A row is ``{"messages": [{"role": ..., "content": ...}, ...]}`` or ``{"prompt": ..., "completion": ...}``
(each a string or a list of messages). Other keys of a row are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES = ("system", "user", "assistant")
SHOWN_PROBLEMS = 20


@dataclass(frozen=True)
class ChatRow:
    """One conversation, with where it came from."""

    file: str
    line: int
    messages: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class DataProblem:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


class ChatDataError(ValueError):
    """Rows that can't be trained on; the message lists them (the first 20, then a count)."""

    def __init__(self, problems: list[DataProblem], hint: str = "") -> None:
        self.problems = problems
        super().__init__(describe_problems(problems) + (f"\n{hint}" if hint else ""))


def describe_problems(problems: list[DataProblem]) -> str:
    lines = [str(problem) for problem in problems[:SHOWN_PROBLEMS]]
    if len(problems) > SHOWN_PROBLEMS:
        lines.append(f"... and {len(problems) - SHOWN_PROBLEMS} more problem(s)")
    return "\n".join(lines)


def _as_messages(value: Any, role: str, key: str) -> list[Any]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, list):
        return value
    raise ValueError(f"{key}: expected a string or a list of messages, got {type(value).__name__}")


def row_messages(row: Any) -> list[dict[str, str]]:
    """The conversation of one parsed row; ValueError says what is wrong with it."""
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    if "messages" in row:
        raw, where = row["messages"], "messages"
        if not isinstance(raw, list):
            raise ValueError(f"messages: expected a list, got {type(raw).__name__}")
    elif "prompt" in row and "completion" in row:
        raw = _as_messages(row["prompt"], "user", "prompt") + _as_messages(row["completion"], "assistant", "completion")
        where = "prompt+completion"
    else:
        raise ValueError('expected {"messages": [...]} or {"prompt": ..., "completion": ...}, '
                         f"got keys {sorted(row)}")
    messages = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise ValueError(f'{where}[{index}]: expected {{"role": ..., "content": ...}}, got {json.dumps(message)[:80]}')
        role, content = message["role"], message["content"]
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} in {where}[{index}] (expected system, user or assistant)")
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"{where}[{index}] ({role}): empty content")
        messages.append({"role": role, "content": content})
    if not any(message["role"] == "assistant" for message in messages):
        raise ValueError("no assistant turn: nothing to learn from this row")
    if messages[0]["role"] == "assistant":
        raise ValueError(f"{where}[0]: a conversation can't start with an assistant turn")
    return messages


def read_chat_jsonl(path: str | Path, limit: int | None = None) -> tuple[list[ChatRow], list[DataProblem]]:
    """Every row of ``path`` (the first ``limit`` non-blank ones), and the problems of the bad ones."""
    source = Path(path)
    if source.is_dir():
        raise ChatDataError([DataProblem(str(path), 0, "is a directory; expected a chat JSONL file")])
    if not source.is_file():
        raise ChatDataError([DataProblem(str(path), 0, "no such file")])
    rows: list[ChatRow] = []
    problems: list[DataProblem] = []
    seen = 0
    with source.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError as error:
                problems.append(DataProblem(str(path), number, f"not UTF-8 text (byte 0x{raw[error.start]:02x} at "
                                                               f"column {error.start + 1}); save the file as UTF-8"))
                seen += 1
                continue
            if not line.strip():
                continue
            if limit is not None and seen >= limit:
                break
            seen += 1
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError as error:
                problems.append(DataProblem(str(path), number, f"bad JSON: {error.msg} (column {error.colno})"))
                continue
            try:
                rows.append(ChatRow(str(path), number, tuple(row_messages(parsed))))
            except ValueError as error:
                problems.append(DataProblem(str(path), number, str(error)))
    if not rows and not problems:
        problems.append(DataProblem(str(path), 0, "no rows"))
    return rows, problems

