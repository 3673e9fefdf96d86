from typing import Literal

import pytest

import promptgym as pg
from promptgym.core.schema import (
    apply_mask,
    bounded_schema,
    check_mask,
    data_model_from_schema,
    describe_fields,
    with_leading_field,
)


class Label(pg.DataModel):
    label: Literal["positive", "negative"] = pg.Field(description="Sentiment")
    score: float = pg.Field(description="Confidence")
    tags: list[str] = pg.Field(default_factory=list, description="Tags")


def test_get_and_json():
    value = Label(label="positive", score=0.5, tags=["a"])
    assert value.get("label") == "positive"
    assert value.get("missing", 7) == 7
    assert value.get_json() == {"label": "positive", "score": 0.5, "tags": ["a"]}


def test_extra_fields_are_rejected():
    with pytest.raises(Exception, match="extra"):
        Label(label="positive", score=1.0, other=1)


def test_round_trip_through_schema():
    rebuilt = data_model_from_schema(Label.get_schema())
    assert rebuilt.__name__ == "Label"
    value = rebuilt(label="negative", score=1.0)
    assert value.get_json() == {"label": "negative", "score": 1.0, "tags": []}
    with pytest.raises(Exception):
        rebuilt(label="neutral", score=1.0)


def test_bounded_schema_adds_max_length_only_to_free_strings():
    schema = bounded_schema(Label.get_schema(), 50)
    assert "maxLength" not in schema["properties"]["label"]
    assert schema["properties"]["tags"]["items"]["maxLength"] == 50
    assert "maxLength" not in Label.get_schema()["properties"]["tags"]["items"]


def test_leading_field_comes_first():
    model = with_leading_field(Label, "thinking", "why")
    assert list(model.model_fields) == ["thinking", "label", "score", "tags"]


def test_describe_fields_lists_enum_choices():
    text = describe_fields(Label)
    assert '- label (one of "positive", "negative"): Sentiment' in text
    assert "- tags (list of string): Tags" in text


def test_masks():
    data = {"thinking": "x", "answer": "y", "other": 1}
    assert apply_mask(data, in_mask=["answer"]) == {"answer": "y"}
    assert apply_mask(data, out_mask=["thinking"]) == {"answer": "y", "other": 1}
    with pytest.raises(ValueError, match="in_mask names field 'answr'"):
        check_mask(list(data), ["answr"], None, "ExactMatch")


def test_rebuilt_models_keep_their_bounds():
    class Bounded(pg.DataModel):
        text: str = pg.Field(max_length=5, description="short")
        score: float = pg.Field(ge=0.0, le=1.0)

    rebuilt = data_model_from_schema(Bounded.get_schema())
    assert rebuilt.get_schema()["properties"]["text"]["maxLength"] == 5
    with pytest.raises(Exception):
        rebuilt(text="too long", score=0.5)
    with pytest.raises(Exception):
        rebuilt(text="ok", score=2.0)
