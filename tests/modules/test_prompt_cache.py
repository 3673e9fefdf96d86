"""A Generator builds its system message and example turns once, and never serves them stale.

The layout depends on the instructions, the input schema and the fixed examples; an optimizer
changes the first and the last during fit(), so a call after a change must send the new prompt.
"""

from __future__ import annotations

import promptgym as pg
from promptgym.modules.variable import variable_values
from promptgym.testing import ScriptedLanguageModel
from tests.support import Answer, Question


def _generator() -> tuple[pg.Generator, ScriptedLanguageModel]:
    lm = ScriptedLanguageModel(responses=[{"answer": "a"}])
    return pg.Generator(data_model=Answer, language_model=lm, instructions="First."), lm


def _example(text: str) -> dict[str, dict[str, str]]:
    return {"inputs": {"question": text}, "outputs": {"answer": text.upper()}}


async def test_changing_instructions_or_examples_between_two_calls_changes_the_request():
    generator, lm = _generator()
    await generator(Question(question="q"))
    generator.state.assign({"instructions": "Second.", "examples": [_example("x")]})
    await generator(Question(question="q"))
    generator.state.update({"examples": [_example("x"), _example("y")]})
    await generator(Question(question="q"))

    first, second, third = (request.messages for request in lm.requests)
    assert first[0]["content"].endswith("First.") and len(first) == 2
    assert second[0]["content"].endswith("Second.") and second[1:3] == [
        {"role": "user", "content": '{"question": "x"}'}, {"role": "assistant", "content": '{"answer": "X"}'}]
    assert len(third) == 6 and third[3]["content"] == '{"question": "y"}'


async def test_a_value_edited_in_place_is_noticed():
    generator, lm = _generator()
    await generator(Question(question="q"))
    generator.state.json["instructions"] = "Edited."
    generator.state.json["examples"].append(_example("z"))
    await generator(Question(question="q"))

    assert lm.requests[1].messages[0]["content"].endswith("Edited.")
    assert lm.requests[1].messages[1]["content"] == '{"question": "z"}'


async def test_overridden_values_for_one_rollout_are_sent_and_the_own_ones_after():
    generator, lm = _generator()
    await generator(Question(question="q"))
    with variable_values({generator.state.name: {"instructions": "Candidate.", "examples": []}}):
        await generator(Question(question="q"))
    await generator(Question(question="q"))

    endings = [request.messages[0]["content"].rsplit(". ", 1)[-1] for request in lm.requests]
    assert endings == ["First.", "Candidate.", "First."]


async def test_the_same_state_reuses_the_layout():
    generator, lm = _generator()
    await generator(Question(question="q1"))
    layout = generator._layout(Question.get_schema(), generator.examples)
    await generator(Question(question="q2"))

    assert generator._layout(Question.get_schema(), generator.examples) is layout
    assert lm.requests[0].messages[0] == lm.requests[1].messages[0]
