"""Turning a model's text into a JSON object, and checking it (once, with pydantic) against what was asked."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pydantic

from promptgym.core.schema import data_model_from_schema, python_type_of_schema
from promptgym.lm.errors import LMConfigurationError, LMOutputError

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


def _loads(text: str) -> Any:
    # strict=False: a raw newline or tab inside a string (JSON wants \n) means only itself; small
    # models write them, and servers without a grammar pass them on.
    return json.loads(text, strict=False)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text`` (tolerating code fences, chatter around it, a cut-off end, raw newlines in strings).

    >>> parse_json_object('{"answer": "two\\nlines"}')
    {'answer': 'two\\nlines'}
    """
    stripped = _FENCE.sub("", text.strip())
    try:
        value = _loads(stripped)
    except json.JSONDecodeError:
        start, end = stripped.find("{"), stripped.rfind("}")
        closed = close_truncated_json(stripped[start:]) if start >= 0 else None
        if closed is not None:
            try:
                return _as_object(_loads(closed), text)
            except json.JSONDecodeError:
                pass
        if start < 0 or end <= start:
            raise LMOutputError(f"no JSON object in the answer: {text[:200]!r}") from None
        try:
            value = _loads(stripped[start : end + 1])
        except json.JSONDecodeError as error:
            raise LMOutputError(f"invalid JSON in the answer ({error.msg}): {text[:200]!r}") from None
    return _as_object(value, text)


def _as_object(value: Any, text: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LMOutputError(f"expected a JSON object, got {type(value).__name__}: {text[:200]!r}")
    return value


Expected = dict[str, Any] | type[pydantic.BaseModel]
"""What an answer must match: a JSON schema, or the DataModel (any pydantic model) it must become."""

MAX_CACHED_MODELS = 512
"""Validators built from JSON schemas, kept by the schema's canonical JSON (least recently used first out)."""


@functools.lru_cache(maxsize=MAX_CACHED_MODELS)
def _adapter_of(canonical_schema: str) -> pydantic.TypeAdapter[Any]:
    schema = json.loads(canonical_schema)
    try:
        if schema.get("type", "object") == "object" and "properties" in schema:
            kind: Any = data_model_from_schema(schema)
            if schema.get("additionalProperties", True) is not False:  # JSON schema allows other keys unless told not to
                kind = type(kind.__name__, (kind,), {"model_config": pydantic.ConfigDict(extra="allow")})
        else:
            kind = python_type_of_schema(schema)  # anyOf (an agent's step), arrays, ...
        return pydantic.TypeAdapter(kind)
    except (ValueError, TypeError, pydantic.PydanticSchemaGenerationError) as error:
        raise LMConfigurationError(f"answer schema {canonical_schema[:200]}: {error}") from None


def schema_validator(schema: dict[str, Any]) -> pydantic.TypeAdapter[Any]:
    """The pydantic validator of answers for a JSON ``schema`` (cached by the schema's content, bounded).

    >>> schema_validator({"type": "object", "properties": {"a": {"type": "string"}}}).validate_python({"a": "x"}).a
    'x'
    """
    return _adapter_of(json.dumps(schema, sort_keys=True, default=str))


def checked_answer(value: Any, expected: Expected) -> tuple[Any, str | None]:
    """``(the validated answer, None)`` when ``value`` matches, else ``(None, what is wrong)``.

    One validation, by pydantic. A DataModel is validated as a Generator builds it (``"3"`` becomes
    ``3`` for an integer field) and comes back as its instance; a JSON schema, whose caller keeps the
    parsed dict itself, strictly. Each problem names its field: ``at answer: Field required``.

    >>> checked_answer({}, {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})[1]
    'at a: Field required'
    """
    try:
        if isinstance(expected, type):
            return expected.model_validate(value), None
        return schema_validator(expected).validate_python(value, strict=True), None
    except pydantic.ValidationError as error:
        return None, "; ".join(f"at {'/'.join(str(part) for part in problem['loc']) or '(root)'}: {problem['msg']}"
                               for problem in error.errors(include_url=False)[:3])


def validation_error(value: Any, expected: Expected) -> str | None:
    """None when ``value`` matches ``expected``, else what is wrong (field path + message)."""
    return checked_answer(value, expected)[1]
