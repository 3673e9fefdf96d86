"""Turning a model's text into a JSON object that matches a schema."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from promptgym.lm.errors import LMOutputError

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def close_truncated_json(text: str) -> str | None:
    """``text`` cut off by ``max_tokens`` inside a JSON object, closed so that it parses.

    A small model can fill a string field until the token limit; asking again
    at temperature 0 gives the same cut. Closing the open string, arrays and
    objects keeps what it wrote (callers still validate it).

    >>> close_truncated_json('{"a": "some long te')
    '{"a": "some long te"}'
    """
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    if not stack:
        return None
    closed = text[:-1] if escaped else text
    if in_string:
        closed += '"'
    closed = closed.rstrip().rstrip(",")
    return closed + "".join(reversed(stack))


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text`` (tolerating code fences, chatter around it, and a cut-off end)."""
    stripped = _FENCE.sub("", text.strip())
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        start, end = stripped.find("{"), stripped.rfind("}")
        closed = close_truncated_json(stripped[start:]) if start >= 0 else None
        if closed is not None:
            try:
                return _as_object(json.loads(closed), text)
            except json.JSONDecodeError:
                pass
        if start < 0 or end <= start:
            raise LMOutputError(f"no JSON object in the answer: {text[:200]!r}") from None
        try:
            value = json.loads(stripped[start : end + 1])
        except json.JSONDecodeError as error:
            raise LMOutputError(f"invalid JSON in the answer ({error.msg}): {text[:200]!r}") from None
    return _as_object(value, text)


def _as_object(value: Any, text: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LMOutputError(f"expected a JSON object, got {type(value).__name__}: {text[:200]!r}")
    return value


_validators: dict[int, tuple[dict[str, Any], jsonschema.Draft202012Validator]] = {}


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """One compiled validator per schema object (a Generator passes the same dict every call)."""
    cached = _validators.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = (schema, jsonschema.Draft202012Validator(schema))
        _validators[id(schema)] = cached
    return cached[1]


def validation_error(value: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """None when ``value`` matches ``schema``, else what is wrong (path + message)."""
    validator = _validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"
