"""A model's answer is validated once, by pydantic: as the DataModel asked for, or as a JSON schema's model."""

from __future__ import annotations

from typing import Literal, Optional

import pydantic
import pytest

from promptgym.lm import json_output
from promptgym.lm.errors import LMConfigurationError
from promptgym.lm.json_output import checked_answer, schema_validator, validation_error


class Inner(pydantic.BaseModel):
    x: int


class Everything(pydantic.BaseModel):
    text: str = pydantic.Field(max_length=3)
    count: int = pydantic.Field(ge=0)
    score: float
    flag: bool
    choice: Literal["a", "b"]
    tags: list[str]
    inner: Optional[Inner] = None


GOOD = {"text": "ab", "count": 1, "score": 1.5, "flag": False, "choice": "a", "tags": ["t"]}


@pytest.mark.parametrize("expected", [Everything, Everything.model_json_schema()], ids=["model", "schema"])
def test_a_valid_answer_passes_and_each_problem_names_its_field(expected):
    model, problem = checked_answer(GOOD, expected)
    assert problem is None and model.count == 1
    assert validation_error({**GOOD, "text": "abcd"}, expected) == "at text: String should have at most 3 characters"
    assert validation_error({**GOOD, "count": -1}, expected) == "at count: Input should be greater than or equal to 0"
    assert validation_error({**GOOD, "choice": "c"}, expected) == "at choice: Input should be 'a' or 'b'"
    assert validation_error({**GOOD, "inner": {"x": "one"}}, expected).startswith("at inner/x: Input should be a valid integer")
    missing = {key: value for key, value in GOOD.items() if key != "flag"}
    assert validation_error(missing, expected) == "at flag: Field required"


def test_a_data_model_converts_as_a_generator_does_and_a_schema_is_checked_strictly():
    # A DataModel's caller gets the model: "3" becomes 3. A schema's caller gets the dict itself, so "3" is wrong.
    assert checked_answer({**GOOD, "count": "3"}, Everything)[0].count == 3
    assert validation_error({**GOOD, "count": "3"}, Everything.model_json_schema()) == \
        "at count: Input should be a valid integer"
    assert validation_error({**GOOD, "flag": 0}, Everything.model_json_schema()) == \
        "at flag: Input should be a valid boolean"


def test_other_keys_pass_unless_the_schema_forbids_them():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert validation_error({"a": "x", "b": 1}, schema) is None
    assert validation_error({"a": "x", "b": 1}, {**schema, "additionalProperties": False}) == \
        "at b: Extra inputs are not permitted"
    assert validation_error({}, schema) == "at a: Field required"


def test_any_schema_pydantic_can_express_is_checked_and_others_are_refused_by_name():
    step = {"anyOf": [{"type": "object", "properties": {"final": {"type": "string"}}, "required": ["final"],
                       "additionalProperties": False},
                      {"type": "object", "properties": {"call": {"type": "string"}}, "required": ["call"],
                       "additionalProperties": False}]}  # an agent's step: a tool call or the final answer
    assert validation_error({"call": "add"}, step) is None and validation_error({"final": "4"}, step) is None
    assert "at " in validation_error({"other": 1}, step)
    assert validation_error([1.5], {"type": "array", "items": {"type": "number"}}) is None
    with pytest.raises(LMConfigurationError, match="unsupported type 'tuple'"):
        validation_error({"a": 1}, {"type": "object", "properties": {"a": {"type": "tuple"}}})


def test_the_model_cache_is_bounded_and_keyed_by_the_schemas_content():
    def schema(index: int) -> dict:
        return {"type": "object", "properties": {f"field_{index}": {"type": "string"}}, "required": [f"field_{index}"]}

    json_output._adapter_of.cache_clear()
    for index in range(json_output.MAX_CACHED_MODELS + 50):  # a schema built anew for each call, as agents do
        assert validation_error({f"field_{index}": "x"}, schema(index)) is None
        assert validation_error({}, schema(index)) == f"at field_{index}: Field required"
    assert json_output._adapter_of.cache_info().currsize == json_output.MAX_CACHED_MODELS
    first = schema_validator(schema(1))
    assert schema_validator(schema(1)) is first  # an equal schema in a new dict: the same model
    assert schema_validator({"required": ["field_1"], "properties": {"field_1": {"type": "string"}},
                         "type": "object"}) is first  # key order does not matter
