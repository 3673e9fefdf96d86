"""The fast schema check never accepts what jsonschema rejects; jsonschema words every error."""

from __future__ import annotations

import itertools
from typing import Literal, Optional

import jsonschema
import pydantic
import pytest

from promptgym.lm.json_output import compile_check, validation_error


class Inner(pydantic.BaseModel):
    x: int


class Everything(pydantic.BaseModel):
    text: str = pydantic.Field(max_length=3)
    count: int = pydantic.Field(ge=0)
    score: float
    flag: bool
    choice: Literal["a", "b"]
    tags: list[str]
    maybe: Optional[str] = None


SCHEMAS = [
    Everything.model_json_schema(),
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": ["integer", "null"], "exclusiveMaximum": 5}}},
    {"type": "object", "properties": {"c": {"const": 1}, "e": {"enum": [True, 1, "1"]}}},
    {"type": "array", "items": {"type": "number", "minimum": 0}, "minItems": 1, "maxItems": 2},
]
VALUES = ["", "abcd", "ab", 0, 1, 1.0, -1, 2.5, 7, True, False, None, [], ["x"], [1, 2, 3], [0.5], {}, {"a": "x"},
          {"a": 1}, {"a": "x", "b": 1}, {"n": 4}, {"n": 5}, {"n": None}, {"n": 4.0}, {"c": 1}, {"c": True},
          {"c": 1.0}, {"e": 1}, {"e": True}, {"e": "1"}, {"e": 2},
          {"text": "ab", "count": 1, "score": 1, "flag": False, "choice": "a", "tags": ["t"]},
          {"text": "abcd", "count": 1, "score": 1, "flag": False, "choice": "a", "tags": []},
          {"text": "ab", "count": -1, "score": 1, "flag": False, "choice": "a", "tags": []},
          {"text": "ab", "count": 1, "score": "1", "flag": False, "choice": "c", "tags": []},
          {"text": "ab", "count": 1, "score": 1.5, "flag": 0, "choice": "b", "tags": [1], "maybe": None},
          {"text": "ab", "count": True, "score": 1.5, "flag": True, "choice": "b", "tags": [], "maybe": "m"}]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_fast_check_accepts_only_what_jsonschema_accepts(schema):
    check = compile_check(schema)
    assert check is not None
    validator = jsonschema.Draft202012Validator(schema)
    for value in itertools.chain(VALUES, [[value] for value in VALUES]):
        if check(value):
            assert validator.is_valid(value), (schema, value)


def test_a_schema_it_does_not_cover_goes_to_jsonschema():
    class Outer(pydantic.BaseModel):
        inner: Inner

    schema = Outer.model_json_schema()  # $defs / $ref
    assert compile_check(schema) is None
    assert validation_error({"inner": {"x": 1}}, schema) is None
    assert validation_error({"inner": {"x": "1"}}, schema) == "at inner/x: '1' is not of type 'integer'"


def test_errors_are_jsonschema_s_words():
    schema = SCHEMAS[1]
    assert validation_error({"a": "x"}, schema) is None
    assert validation_error({"a": 1}, schema) == "at a: 1 is not of type 'string'"
    assert validation_error({}, schema) == "at (root): 'a' is a required property"


def test_the_validator_cache_is_bounded_and_keyed_by_the_schemas_content():
    from promptgym.lm import json_output

    def schema(index: int) -> dict:
        return {"type": "object", "properties": {f"field_{index}": {"type": "string"}}, "required": [f"field_{index}"]}

    for index in range(3 * json_output.MAX_CACHED_VALIDATORS):  # a schema built anew for each call, as agents do
        assert validation_error({f"field_{index}": "x"}, schema(index)) is None
        assert validation_error({}, schema(index)) is not None
    assert json_output.cached_validators() <= 2 * json_output.MAX_CACHED_VALIDATORS
    first = json_output._validator(schema(1))
    assert json_output._validator(schema(1))[0] is first[0]  # an equal schema in a new dict: the same compiled one
    assert json_output._validator({"required": ["field_1"], "properties": {"field_1": {"type": "string"}},
                                   "type": "object"})[0] is first[0]  # key order does not matter
