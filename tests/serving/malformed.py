"""At least 30 malformed requests, each with the status and the field its answer must name.

Used by tests/serving/test_malformed.py (in-process) and bench/serving/malformed.py (a real server).
Every case runs against a server of one program ``qa`` (Question -> Answer) with the API key
``KEY``; ``key`` says which key a case sends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KEY = "test-key-123"
PREDICT = "/v1/programs/qa/predict"
CHAT = "/v1/chat/completions"
JSON = {"content-type": "application/json"}


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: bytes | None
    status: int
    names: str | None = None           # a text the message must contain (the field, or what is wrong)
    param: str | None = None           # the error's ``param`` (the field path), when there is one
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))
    key: str = "right"                 # right | wrong | none


def chat(body: Any) -> bytes:
    return json.dumps(body).encode()


def user(content: Any, **extra: Any) -> bytes:
    text = content if isinstance(content, str) else json.dumps(content)
    return chat({"model": "qa", "messages": [{"role": "user", "content": text}], **extra})


HUGE = json.dumps({"question": "x" * 2_000_000}).encode()

CASES = [
    Case("predict: invalid JSON", "POST", PREDICT, b'{"question": ', 400, "not valid JSON"),
    Case("predict: empty body", "POST", PREDICT, b"", 400, "expected a JSON object"),
    Case("predict: a number of 5000 digits", "POST", PREDICT, b'{"question": ' + b"9" * 5000 + b"}", 400,
         "a number of more than 4300 digits"),
    Case("predict: JSON array", "POST", PREDICT, b"[1, 2]", 422, "JSON object"),
    Case("predict: JSON string", "POST", PREDICT, b'"hello"', 422, "JSON object"),
    Case("predict: JSON null", "POST", PREDICT, b"null", 422, "JSON object"),
    Case("predict: missing field", "POST", PREDICT, b'{"context": "c"}', 422, "question", "question"),
    Case("predict: number for a string", "POST", PREDICT, b'{"question": 3}', 422, "question", "question"),
    Case("predict: null for a string", "POST", PREDICT, b'{"question": null}', 422, "question", "question"),
    Case("predict: list for a string", "POST", PREDICT, b'{"question": ["a"]}', 422, "question", "question"),
    Case("predict: object for a string", "POST", PREDICT, b'{"question": {"a": 1}}', 422, "question", "question"),
    Case("predict: wrong type of an optional field", "POST", PREDICT, b'{"question": "q", "context": 5}', 422,
         "context", "context"),
    Case("predict: unknown field", "POST", PREDICT, b'{"question": "q", "colour": "red"}', 422, "colour", "colour"),
    Case("predict: body larger than the limit", "POST", PREDICT, HUGE, 413, "larger than the limit"),
    Case("predict: not sent as JSON", "POST", PREDICT, b"question=hi", 400, "Content-Type: application/json",
         headers={"content-type": "application/x-www-form-urlencoded"}),
    Case("predict: invalid UTF-8", "POST", PREDICT, b'{"question": "\xff\xfe"}', 400, "not valid JSON"),
    Case("predict: deeply nested JSON", "POST", PREDICT, b"[" * 100_000 + b"]" * 100_000, 400, "not valid JSON"),
    Case("predict: unknown program", "POST", "/v1/programs/nope/predict", b'{"question": "q"}', 404, "nope", "name"),
    Case("predict: GET instead of POST", "GET", PREDICT, None, 405, "GET"),
    Case("unknown route", "POST", "/v1/nothing", b"{}", 404, "/v1/nothing"),
    Case("chat: invalid JSON", "POST", CHAT, b'{"model": "qa", "messages": [', 400, "not valid JSON"),
    Case("chat: missing model", "POST", CHAT, chat({"messages": [{"role": "user", "content": "{}"}]}), 422, "model",
         "model"),
    Case("chat: empty model", "POST", CHAT, chat({"model": "", "messages": [{"role": "user", "content": "{}"}]}), 422,
         "model", "model"),
    Case("chat: model is a number", "POST", CHAT, chat({"model": 7, "messages": [{"role": "user", "content": "{}"}]}),
         422, "model", "model"),
    Case("chat: unknown model", "POST", CHAT, chat({"model": "gpt-9", "messages": [{"role": "user", "content": "{}"}]}),
         404, "gpt-9", "model"),
    Case("chat: missing messages", "POST", CHAT, chat({"model": "qa"}), 422, "messages", "messages"),
    Case("chat: empty messages", "POST", CHAT, chat({"model": "qa", "messages": []}), 422, "messages", "messages"),
    Case("chat: messages is a string", "POST", CHAT, chat({"model": "qa", "messages": "hi"}), 422, "messages",
         "messages"),
    Case("chat: unknown role", "POST", CHAT, chat({"model": "qa", "messages": [{"role": "robot", "content": "{}"}]}),
         422, "messages[0].role", "messages[0].role"),
    Case("chat: no user message", "POST", CHAT, chat({"model": "qa", "messages": [{"role": "system", "content": "x"}]}),
         400, "no user message", "messages"),
    Case("chat: user content is not JSON", "POST", CHAT, user("What is 2+2?"), 400, "messages[0].content",
         "messages[0].content"),
    Case("chat: user content is a JSON array", "POST", CHAT, user([1, 2]), 422, "messages[0].content",
         "messages[0].content"),
    Case("chat: wrong type in the input", "POST", CHAT, user({"question": 3}), 422, "messages[0].content.question",
         "messages[0].content.question"),
    Case("chat: missing input field", "POST", CHAT, user({"context": "c"}), 422, "messages[0].content.question",
         "messages[0].content.question"),
    Case("chat: image part", "POST", CHAT, chat({"model": "qa", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}), 400, "messages[0].content[0]",
         "messages[0].content[0]"),
    Case("chat: negative temperature", "POST", CHAT, user({"question": "q"}, temperature=-1), 422, "temperature",
         "temperature"),
    Case("chat: max_tokens 0", "POST", CHAT, user({"question": "q"}, max_tokens=0), 422, "max_tokens", "max_tokens"),
    Case("chat: body larger than the limit", "POST", CHAT, user({"question": "x" * 2_000_000}), 413,
         "larger than the limit"),
    Case("no API key", "POST", PREDICT, b'{"question": "q"}', 401, "API key", key="none"),
    Case("wrong API key", "POST", PREDICT, b'{"question": "q"}', 401, "API key", key="wrong"),
    Case("chat without API key", "POST", CHAT, user({"question": "q"}), 401, "API key", key="none"),
    Case("metrics without API key", "GET", "/metrics", None, 401, "API key", key="none"),
]


def request_headers(case: Case) -> dict[str, str]:
    headers = dict(case.headers)
    if case.key == "right":
        headers["authorization"] = f"Bearer {KEY}"
    elif case.key == "wrong":
        headers["authorization"] = "Bearer not-the-key"
    return headers


def problems(case: Case, status: int, body: bytes) -> list[str]:
    """What is wrong with a server's answer to ``case`` (empty: right status, named field, no traceback)."""
    found = []
    if status != case.status:
        found.append(f"status {status}, expected {case.status}")
    if b"Traceback" in body:
        found.append("a traceback in the response")
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return [*found, f"not an error object: {body[:200]!r}"]
    if case.names and case.names not in error.get("message", ""):
        found.append(f"message {error.get('message')!r} does not name {case.names!r}")
    if case.param and error.get("param") != case.param:
        found.append(f"param {error.get('param')!r}, expected {case.param!r}")
    return found
