"""The system message a Generator sends: fields, the JSON of each turn, allowed values, objective, instructions."""

from __future__ import annotations

from typing import Literal

import promptgym as pg
from promptgym.modules.prompt_layout import structured_system_prompt
from promptgym.testing import ScriptedLanguageModel


class Ticket(pg.DataModel):
    title: str = pg.Field(description="The ticket's title")
    priority: int = pg.Field(description="1 (low) to 3 (high)")


class Triage(pg.DataModel):
    team: Literal["billing", "infra"] = pg.Field(description="The team that owns it")
    tags: list[str] = pg.Field(description="Short labels")


def test_every_field_its_type_the_turn_shapes_and_the_allowed_values_are_named():
    prompt = structured_system_prompt("Route it.", Ticket.get_schema(), Triage.get_schema())

    assert prompt.splitlines()[:7] == [
        "Input fields:",
        "1. `title` (string): The ticket's title",
        "2. `priority` (integer): 1 (low) to 3 (high)",
        "",
        "Output fields:",
        '1. `team` (one of "billing", "infra"): The team that owns it',
        "2. `tags` (list of string): Short labels",
    ]
    assert '{"title": "{title}", "priority": {priority}}' in prompt
    assert '{"team": "{team}", "tags": {tags}}' in prompt
    assert "The value of `team` must be exactly one of: billing; infra (no other characters)." in prompt
    assert prompt.endswith("Objective: given `title` and `priority`, produce `team` and `tags`. Route it.")


def test_a_conversation_input_is_named_as_the_turns_that_follow():
    class Context(pg.DataModel):
        user: str
        messages: list[pg.ChatMessage] = []

    prompt = structured_system_prompt("", Context.get_schema(), Triage.get_schema())

    assert "2. `messages`: the conversation so far" in prompt
    assert '{"user": "{user}"} (then the conversation so far, as chat turns)' in prompt
    assert prompt.endswith("Objective: given `user` and `messages`, produce `team` and `tags`.")


def test_fields_after_the_conversation_are_not_described_since_the_turns_leave_them_out():
    class Step(pg.DataModel):
        user: str
        messages: list[pg.ChatMessage] = []
        draft: str = ""

    generator = pg.Generator(data_model=Triage, language_model=ScriptedLanguageModel())
    messages = generator.messages(Step(user="ann", messages=[], draft="x").model_dump(mode="json"), input_schema=Step.get_schema())

    assert "draft" not in messages[0]["content"] and all("draft" not in m["content"] for m in messages[1:])
    assert messages[0]["content"].endswith("Objective: given `user` and `messages`, produce `team` and `tags`. "
                                           "Read the input and answer with the output fields.")


def test_a_generator_describes_plain_dict_inputs_from_their_values():
    generator = pg.Generator(data_model=Triage, language_model=ScriptedLanguageModel(), instructions="Route it.")

    system = generator.messages({"title": "disk full", "priority": 3})[0]["content"]

    assert "1. `title` (string)\n2. `priority` (integer)" in system


async def test_a_chatting_generator_sends_its_instructions_alone():
    lm = ScriptedLanguageModel(responses=["hello"])
    generator = pg.Generator(language_model=lm, instructions="Be kind.")

    await generator(pg.ChatMessages(messages=[pg.ChatMessage(role="user", content="hi")]))

    assert lm.requests[0].messages[0] == {"role": "system", "content": "Be kind."}
