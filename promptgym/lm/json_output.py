"""Turning a model's text into a JSON object that matches a schema."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from promptgym.lm.errors import LMOutputError

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text`` (tolerating code fences and chatter around it)."""
    stripped = _FENCE.sub("", text.strip())
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        start, end = stripped.find("{"), stripped.rfind("}")
        if start < 0 or end <= start:
            raise LMOutputError(f"no JSON object in the answer: {text[:200]!r}") from None
        try:
            value = json.loads(stripped[start : end + 1])
        except json.JSONDecodeError as error:
            raise LMOutputError(f"invalid JSON in the answer ({error.msg}): {text[:200]!r}") from None
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
