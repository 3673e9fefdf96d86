"""Turning a model's text into a JSON object that matches a schema."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from typing import Any, Callable

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


Check = Callable[[Any], bool]

MAX_CACHED_VALIDATORS = 512
"""Compiled validators kept (by the schema's canonical JSON), and as many recently seen schema objects."""
Compiled = tuple[jsonschema.Draft202012Validator, Check | None]
_by_content: OrderedDict[str, Compiled] = OrderedDict()
_by_identity: OrderedDict[int, tuple[dict[str, Any], Compiled]] = OrderedDict()
_cache_lock = threading.Lock()

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "format", "$schema", "$comment",
                          "readOnly", "writeOnly", "deprecated"})
"""Keywords that never make a value invalid (``format`` only annotates by default in Draft 2020-12)."""

_TYPES: dict[str, Check] = {
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
}


def _all(checks: list[Check]) -> Check:
    return lambda value: all(check(value) for check in checks)


def compile_check(schema: Any) -> Check | None:
    """A fast check that says True only for values ``schema`` accepts, or None for a schema it doesn't cover.

    Covers what output DataModels use: ``type``, ``properties``, ``required``,
    ``additionalProperties``, ``items``, ``enum``, ``const``, ``anyOf``, string
    lengths, numeric bounds, array lengths. It may say False for a valid value
    (an integer given as ``1.0``): the caller then asks jsonschema, which also
    words the error.

    >>> check = compile_check({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    >>> check({"a": "x"}), check({"a": 1}), check({})
    (True, False, False)
    >>> compile_check({"type": "object", "patternProperties": {"^a": {}}}) is None
    True
    """
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict):
        return None
    checks: list[Check] = []
    for keyword, argument in schema.items():
        check = _keyword_check(keyword, argument, schema)
        if check is None:
            return None
        if check is not _NOTHING:
            checks.append(check)
    return checks[0] if len(checks) == 1 else _all(checks)


def _NOTHING(value: Any) -> bool:
    return True


def _keyword_check(keyword: str, argument: Any, schema: dict[str, Any]) -> Check | None:  # noqa: C901 - one case per keyword
    """The check for one keyword, ``_NOTHING`` for an annotation, None for a keyword not covered."""
    if keyword in _ANNOTATIONS or keyword == "additionalProperties" and "properties" in schema:
        return _NOTHING  # additionalProperties is checked with properties
    if keyword == "type":
        types = [argument] if isinstance(argument, str) else argument
        if not isinstance(types, list) or not all(name in _TYPES for name in types):
            return None
        kinds = [_TYPES[name] for name in types]
        return kinds[0] if len(kinds) == 1 else (lambda value: any(kind(value) for kind in kinds))
    if keyword == "properties":
        return _properties_check(argument, schema.get("additionalProperties", True))
    if keyword == "required" and isinstance(argument, list):
        return lambda value: not isinstance(value, dict) or all(name in value for name in argument)
    if keyword == "items":
        item = compile_check(argument)
        return None if item is None else (lambda value: not isinstance(value, list) or all(item(x) for x in value))
    if keyword in ("enum", "const"):
        allowed = argument if keyword == "enum" else [argument]
        if not isinstance(allowed, list) or not all(isinstance(x, (str, int, float, bool)) or x is None for x in allowed):
            return None
        return lambda value: any(type(value) is type(x) and value == x for x in allowed)
    if keyword == "anyOf" and isinstance(argument, list):
        options = [compile_check(option) for option in argument]
        if any(option is None for option in options):
            return None
        return lambda value: any(option(value) for option in options)  # type: ignore[misc]
    return _bound_check(keyword, argument)


def _properties_check(properties: Any, additional: Any) -> Check | None:
    if not isinstance(properties, dict) or additional not in (True, False):
        return None
    checks = {name: compile_check(subschema) for name, subschema in properties.items()}
    if any(check is None for check in checks.values()):
        return None

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        if additional is False and any(name not in checks for name in value):
            return False
        return all(checks[name](item) for name, item in value.items() if name in checks)  # type: ignore[misc]

    return check


def _bound_check(keyword: str, argument: Any) -> Check | None:
    """``minLength``... ``maximum``: each applies to one kind of value and passes the others."""
    if not isinstance(argument, (int, float)) or isinstance(argument, bool):
        return None
    sized = {"minLength": (str, lambda n: n >= argument), "maxLength": (str, lambda n: n <= argument),
             "minItems": (list, lambda n: n >= argument), "maxItems": (list, lambda n: n <= argument)}
    if keyword in sized:
        kind, fits = sized[keyword]
        return lambda value: not isinstance(value, kind) or fits(len(value))
    bounds = {"minimum": lambda x: x >= argument, "maximum": lambda x: x <= argument,
              "exclusiveMinimum": lambda x: x > argument, "exclusiveMaximum": lambda x: x < argument}
    if keyword in bounds:
        fits = bounds[keyword]
        return lambda value: isinstance(value, bool) or not isinstance(value, (int, float)) or fits(value)
    return None


def _validator(schema: dict[str, Any]) -> Compiled:
    """One compiled validator (and fast check) per distinct schema, in two bounded LRUs.

    A Generator passes the same dict every call: found by identity, no hashing. A schema built
    anew per call (agents, served programs) is found by its canonical JSON. Both hold at most
    ``MAX_CACHED_VALIDATORS`` entries, so traffic with ever new schemas can't grow them; the
    identity entries keep their schema alive, so an ``id`` is never reused while it is a key.
    """
    with _cache_lock:
        seen = _by_identity.get(id(schema))
        if seen is not None and seen[0] is schema:
            _by_identity.move_to_end(id(schema))
            return seen[1]
    key = json.dumps(schema, sort_keys=True, default=str)
    with _cache_lock:
        compiled = _by_content.get(key)
        if compiled is None:
            compiled = (jsonschema.Draft202012Validator(schema), compile_check(schema))
            _by_content[key] = compiled
        _by_content.move_to_end(key)
        _by_identity[id(schema)] = (schema, compiled)
        for cache in (_by_content, _by_identity):
            while len(cache) > MAX_CACHED_VALIDATORS:
                cache.popitem(last=False)
    return compiled


def cached_validators() -> int:
    """How many entries the validator caches hold (both; a soak watches it stay bounded)."""
    return len(_by_content) + len(_by_identity)


def validation_error(value: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """None when ``value`` matches ``schema``, else what is wrong (path + message)."""
    validator, fast = _validator(schema)
    if fast is not None and fast(value):
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"
