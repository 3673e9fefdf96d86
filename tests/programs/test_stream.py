"""program.stream(x): the last output field's text as the model writes it."""

from __future__ import annotations

import asyncio

import promptgym as pg
from promptgym.modules.field_stream import FieldReader
from promptgym.testing import ScriptedLanguageModel


class Question(pg.DataModel):
    question: str


class Answer(pg.DataModel):
    answer: str


class Scored(pg.DataModel):
    answer: str
    score: int


async def qa(lm, module=pg.Generator, data_model=Answer) -> pg.Program:
    inputs = pg.Input(data_model=Question)
    outputs = await module(data_model=data_model, language_model=lm)(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name="qa")


def test_field_reader_shows_a_string_as_it_is_written_escapes_included():
    reader = FieldReader("answer")
    pieces = ['{"thinking": "x", "ans', 'wer": "caf', '\\u00', 'e9 \\"ok', '\\" done"}']
    assert [reader.feed(piece) for piece in pieces] == ["", "caf", "", 'é "ok', '" done']
    assert reader.shown == 'café "ok" done'


async def test_a_generator_streams_its_last_field_and_the_output_is_whole():
    lm = ScriptedLanguageModel(responses=[{"answer": "Paris is the capital of France"}])
    program = await qa(lm)
    async with program.stream({"question": "capital?"}) as stream:
        pieces = [piece async for piece in stream]
    assert len(pieces) > 3 and "".join(pieces) == "Paris is the capital of France"
    assert pieces[0] == "Paris "
    assert stream.output.get("answer") == "Paris is the capital of France"
    assert lm.streams.finished == 1 and lm.requests[0].schema is not None


async def test_chain_of_thought_streams_the_answer_not_the_thinking():
    lm = ScriptedLanguageModel(responses=[{"thinking": "step one step two", "answer": "forty two"}])
    program = await qa(lm, module=pg.ChainOfThought)
    assert [piece async for piece in program.stream({"question": "6*7?"})] == ["forty ", "two"]


async def test_a_last_field_that_is_not_a_string_comes_at_the_end():
    lm = ScriptedLanguageModel(responses=[{"answer": "yes", "score": 7}])
    program = await qa(lm, data_model=Scored)
    assert [piece async for piece in program.stream({"question": "q"})] == ["7"]


async def test_an_answer_that_fails_validation_is_asked_again_and_completed():
    lm = ScriptedLanguageModel(responses=[{"answer": 5}, {"answer": "draft two"}])
    program = await qa(lm)
    stream = program.stream({"question": "q"})
    assert "".join([piece async for piece in stream]) == "draft two"
    assert len(lm.requests) == 2


async def test_a_program_not_ending_in_a_generator_yields_the_field_once():
    class Upper(pg.Program):
        async def call(self, inputs, training=False):
            return Answer(answer=inputs.get("question").upper())

    program = Upper(name="upper")
    assert [piece async for piece in program.stream(Question(question="hi there"))] == []  # no output schema
    stream = program.stream(Question(question="hi there"))
    stream.field = "answer"
    assert [piece async for piece in stream] == ["HI THERE"]


async def test_closing_the_stream_cancels_the_run_and_stops_the_model():
    lm = ScriptedLanguageModel(responses=[{"answer": " ".join(["word"] * 500)}], stream_delay_s=0.001)
    program = await qa(lm)
    stream = program.stream({"question": "long"})
    assert await stream.__anext__() == "word "
    await stream.aclose()
    assert (lm.streams.stopped, lm.streams.finished) == (1, 0)
    assert lm.streams.pieces < 500
    assert not [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
