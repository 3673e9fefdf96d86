"""Corrections are checked against the output schema; program schemas are kept in the store."""

from __future__ import annotations

import pytest

from promptgym.core.data_model import DataModel
from promptgym.traces import CorrectionError, TraceStore, check_correction


class Answer(DataModel):
    answer: str
    confidence: float


SCHEMA = Answer.model_json_schema()


def test_a_correction_that_fits_is_returned_as_given():
    assert check_correction(SCHEMA, {"answer": "4", "confidence": 0.9}) == {"answer": "4", "confidence": 0.9}
    assert check_correction(None, {"anything": 1}) == {"anything": 1}


@pytest.mark.parametrize(("correction", "field", "words"), [
    ({"answer": 4, "confidence": 0.9}, "correction.answer", "not of type 'string'"),
    ({"answer": "4"}, "correction.confidence", "required"),
    (["4"], "correction", "JSON object"),
])
def test_a_bad_correction_names_the_field(correction, field, words):
    with pytest.raises(CorrectionError, match=words) as caught:
        check_correction(SCHEMA, correction)
    assert caught.value.field == field


def test_described_programs_keep_their_schemas_per_version(tmp_path):
    store = TraceStore(tmp_path / "traces.db")
    store.describe_program("qa", "v1", input_schema={"type": "object"}, output_schema=SCHEMA, source="qa.json")
    store.record(program="qa", version="v1", inputs={})
    store.record(program="qa", version="v2", inputs={})
    reopened = TraceStore(tmp_path / "traces.db")
    assert reopened.program_schemas("qa", "v1") == ({"type": "object"}, SCHEMA)
    assert reopened.program_schemas("qa", "v2") is None
    assert reopened.programs() == [("qa", "v1"), ("qa", "v2")]
