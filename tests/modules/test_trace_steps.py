"""Trace steps carry the schema of a Generator's inputs, and survive the JSON of saved results and Ray's wire."""

from __future__ import annotations

import json

import promptgym as pg
from promptgym.modules.tracing import TraceStep, tracing
from promptgym.testing import ScriptedLanguageModel
from tests.support import Answer, Question


async def test_a_generator_step_records_the_schema_of_its_inputs() -> None:
    generator = pg.Generator(data_model=Answer, language_model=ScriptedLanguageModel(responses=[{"answer": "4"}]))
    with tracing() as trace:
        await generator(Question(question="2+2"))
    [step] = trace.steps
    assert step.schema == Question.get_schema()
    assert step.schema["properties"]["question"]["description"] == "A question"


def test_a_step_round_trips_through_json_and_old_three_item_steps_still_load() -> None:
    step = TraceStep("answer", {"question": "2+2"}, {"answer": "4"}, Question.get_schema())
    assert TraceStep.from_json(json.loads(json.dumps(step.to_json()))) == step
    assert TraceStep.from_json(["answer", {"question": "2+2"}, {"answer": "4"}]).schema is None
