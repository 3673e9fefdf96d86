"""The system message a structured Generator sends.

It names every input and output field with its type and description, shows
the JSON object each turn holds, restates the values a choice field allows,
and ends on the objective followed by the trainable instructions. Small
local models pick the answer's values far better from this than from the
instructions and the output fields alone (docs/benchmarks.md, "Why the
prompt changed").

>>> print(structured_system_prompt(
...     "Be brief.",
...     {"properties": {"question": {"type": "string", "description": "An exam question"}}},
...     {"properties": {"topic": {"type": "string", "enum": ["stem", "other"]}}}))
Input fields:
1. `question` (string): An exam question
<BLANKLINE>
Output fields:
1. `topic` (one of "stem", "other")
<BLANKLINE>
Each exchange has this shape, with the values filled in.
The input is a JSON object:
{"question": "{question}"}
The answer is a JSON object:
{"topic": "{topic}"}
The value of `topic` must be exactly one of: stem; other (no other characters).
<BLANKLINE>
Objective: given `question`, produce `topic`. Be brief.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from promptgym.core.schema import SchemaField, json_literal, schema_fields

MAX_CACHED_LAYOUTS = 32
"""Layouts a Generator keeps (one per instructions text; rollouts of many candidates alternate)."""

PROMPT_TEMPLATE = """Input fields:
{input_fields}

Output fields:
{output_fields}

Each exchange has this shape, with the values filled in.
The input is a JSON object:
{input_shape}
The answer is a JSON object:
{output_shape}{allowed_values}

Objective: given {input_names}, produce {output_names}. {instructions}"""

CONVERSATION = "then the conversation so far, as chat turns"


def structured_system_prompt(instructions: str, input_schema: dict[str, Any], output_schema: dict[str, Any]) -> str:
    """:data:`PROMPT_TEMPLATE` filled in for these schemas.

    A ``messages`` input field is the conversation's turns; as in
    ``Generator.messages``, only the fields before it are shown (as one JSON
    turn), so only those are described.
    """
    every_input = schema_fields(input_schema)
    names_in_order = [field.name for field in every_input]
    conversation = "messages" in names_in_order
    shown = names_in_order.index("messages") if conversation else len(every_input)
    inputs = every_input[:shown]
    outputs = schema_fields(output_schema)
    input_fields = field_list(inputs) + (f"\n{len(inputs) + 1}. `messages`: the conversation so far" if conversation else "")
    input_shape = shape(inputs) if inputs else "{}"
    if conversation:
        input_shape += f" ({CONVERSATION})" if inputs else f"\n({CONVERSATION}, instead of the object)"
    return PROMPT_TEMPLATE.format(
        input_fields=input_fields or "(none)", output_fields=field_list(outputs) or "(none)",
        input_shape=input_shape, output_shape=shape(outputs), allowed_values="".join(choice_rule(f) for f in outputs),
        input_names=names(every_input[:shown + 1]),
        output_names=names(outputs), instructions=instructions).rstrip()


def field_list(fields: list[SchemaField]) -> str:
    """``1. `name` (kind): description``, one line per field."""
    return "\n".join(f"{number}. `{field.name}` ({field.kind})" + (f": {field.description}" if field.description else "")
                     for number, field in enumerate(fields, 1))


def shape(fields: list[SchemaField]) -> str:
    """The JSON object with a ``{name}`` placeholder per field (quoted for strings)."""
    def placeholder(field: SchemaField) -> str:
        return f'"{{{field.name}}}"' if field.type == "string" else f"{{{field.name}}}"

    return "{" + ", ".join(f"{json_literal(field.name)}: {placeholder(field)}" for field in fields) + "}"


def choice_rule(field: SchemaField) -> str:
    if not field.choices:
        return ""
    values = "; ".join(str(value) if isinstance(value, str) else json_literal(value) for value in field.choices)
    return f"\nThe value of `{field.name}` must be exactly one of: {values} (no other characters)."


def names(fields: list[SchemaField]) -> str:
    """```a`, `b` and `c``` (or "nothing")."""
    quoted = [f"`{field.name}`" for field in fields]
    if len(quoted) < 2:
        return quoted[0] if quoted else "nothing"
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def example_turns(examples: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Each example as its (user, assistant) turn texts: the inputs' and the outputs' JSON."""
    return tuple((json.dumps(example["inputs"], ensure_ascii=False), json.dumps(example["outputs"], ensure_ascii=False))
                 for example in examples)


@dataclass(frozen=True)
class PromptLayout:
    """What a Generator's prompt holds before the input, built once for its instructions, input schema and examples.

    ``matches`` tells whether it still holds for the values a call reads: it compares
    them with its own copies, by value (a dict or list edited in place is noticed too).
    """

    instructions: str
    input_schema: dict[str, Any]
    examples: list[dict[str, Any]]
    system: str
    turns: tuple[tuple[str, str], ...]

    @classmethod
    def build(cls, instructions: str, input_schema: dict[str, Any], examples: list[dict[str, Any]],
              system: str) -> "PromptLayout":
        return cls(instructions, copy.deepcopy(input_schema), copy.deepcopy(examples), system, example_turns(examples))

    def matches(self, instructions: str, input_schema: dict[str, Any], examples: list[dict[str, Any]]) -> bool:
        return self.instructions == instructions and self.input_schema == input_schema and self.examples == examples
