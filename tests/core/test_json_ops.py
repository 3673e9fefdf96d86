"""JSON-schema operations: each schema operation agrees with its JSON twin."""

import pytest

import promptgym as pg
from promptgym.core import json_ops
from promptgym.core.schema import data_model_from_schema


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


class Thinking(pg.DataModel):
    thinking: str
    answer: str


def agrees(schema, json):
    """The JSON validates against the schema (via the DataModel class built from it)."""
    return data_model_from_schema(schema).model_validate(json).get_json() == json


def test_concatenation_suffixes_names_already_used():
    one, two = Answer.get_schema(), Answer.get_schema()
    schema = json_ops.concatenate_schema(json_ops.concatenate_schema(one, two), two)
    json = json_ops.concatenate_json(json_ops.concatenate_json({"answer": "a"}, {"answer": "b"}), {"answer": "c"})
    assert list(schema["properties"]) == ["answer", "answer_1", "answer_2"] == list(json)
    assert schema["required"] == ["answer", "answer_1", "answer_2"]
    assert schema["properties"]["answer_1"]["description"] == "The answer"
    assert agrees(schema, json)


def test_factorize_groups_fields_by_base_name_under_a_plural():
    schema = json_ops.factorize_schema(json_ops.concatenate_schema(Answer.get_schema(), Answer.get_schema()))
    json = json_ops.factorize_json({"answer": "a", "answer_1": "b"})
    assert json == {"answers": ["a", "b"]}
    assert schema["properties"]["answers"]["type"] == "array"
    assert agrees(schema, json)
    assert json_ops.plural("query") == "queries" and json_ops.plural("box") == "boxes"


@pytest.mark.parametrize(("mask", "pattern", "kept"), [(["answer"], None, ["answer", "answer_1"]),
                                                       (None, "^think", ["thinking"])])
def test_masks_match_base_names_and_patterns(mask, pattern, kept):
    schema = json_ops.concatenate_schema(Thinking.get_schema(), Answer.get_schema())
    json = {"thinking": "t", "answer": "a", "answer_1": "b"}
    kept_schema = json_ops.in_mask_schema(schema, mask=mask, pattern=pattern)
    kept_json = json_ops.in_mask_json(json, mask=mask, pattern=pattern)
    assert list(kept_schema["properties"]) == kept == list(kept_json)
    dropped = json_ops.out_mask_json(json, mask=mask, pattern=pattern)
    assert sorted(dropped) == sorted(set(json) - set(kept))
    assert agrees(json_ops.out_mask_schema(schema, mask=mask, pattern=pattern), dropped)


def test_out_mask_reaches_nested_objects():
    class Inner(pg.DataModel):
        thinking: str
        answer: str

    class Outer(pg.DataModel):
        step: Inner

    json = json_ops.out_mask_json({"step": {"thinking": "t", "answer": "a"}}, mask=["thinking"])
    schema = json_ops.out_mask_schema(Outer.get_schema(), mask=["thinking"])
    assert json == {"step": {"answer": "a"}}
    assert agrees(schema, json)


def test_prefix_and_suffix_rename_every_field():
    assert json_ops.prefix_json({"answer": 1}, "gold") == {"gold_answer": 1}
    schema = json_ops.suffix_schema(Answer.get_schema(), "draft")
    assert list(schema["properties"]) == ["answer_draft"] and schema["required"] == ["answer_draft"]
    assert schema["properties"]["answer_draft"]["title"] == "Answer Draft"
