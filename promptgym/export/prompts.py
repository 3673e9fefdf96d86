"""Each Generator's exact messages: system text, demonstrations as turns, and the input slot.

    [exported] = export_prompts(program)
    exported.messages[-1]            # {"role": "user", "content": "{{input_json}}"}
    exported.fill({"question": "2+2?"})   # the messages the Generator sends for that input
    exported.request({"question": "2+2?"})  # an OpenAI chat-completions body, schema included

The filled messages are byte-for-byte what the Generator sends (its fixed demonstrations;
retrieved ones, from KNNFewShot, depend on each input and can't be exported: ``notes`` says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from promptgym.modules.generator import Generator

INPUT_SLOT = "{{input_json}}"
"""Where the input goes: the last user message's content, replaced by the input as JSON text."""


@dataclass
class ExportedPrompt:
    """One Generator's prompt, ready for another stack."""

    generator: str
    model: str
    messages: list[dict[str, str]]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    temperature: float
    max_tokens: int
    seed: int | None = None
    notes: list[str] = field(default_factory=list)

    def fill(self, inputs: dict[str, Any]) -> list[dict[str, str]]:
        """The messages for ``inputs`` (the slot replaced by their JSON, as the Generator writes it)."""
        text = json.dumps(inputs, ensure_ascii=False)
        return [{**message, "content": text} if message["content"] == INPUT_SLOT else dict(message)
                for message in self.messages]

    def request(self, inputs: dict[str, Any] | None = None, model: str | None = None) -> dict[str, Any]:
        """An OpenAI chat-completions body (the slot kept when ``inputs`` is None)."""
        body: dict[str, Any] = {"model": model or self.model.split("/", 1)[-1],
                                "messages": self.messages if inputs is None else self.fill(inputs),
                                "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.seed is not None:
            body["seed"] = self.seed
        if self.output_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": self.output_schema.get("title", "output"), "schema": self.output_schema}}
        return body


def export_prompts(program: Any) -> list[ExportedPrompt]:
    """The prompt of every Generator of a functional program, in execution order."""
    graph = getattr(program, "_graph", None)
    if graph is None:
        raise ValueError(f"program {getattr(program, 'name', '?')!r} is not functional (a subclass with its own "
                         "call()): its Generators' inputs are only known while it runs, so they can't be exported")
    exported = [_export(node.module, node.parents) for node in graph.nodes if isinstance(node.module, Generator)]
    if not exported:
        raise ValueError(f"program {program.name!r} has no Generator: nothing to export")
    return exported


def _export(generator: Generator, parents: list[Any]) -> ExportedPrompt:
    notes = []
    if len(parents) != 1:
        notes.append(f"{len(parents)} inputs: the slot takes them as one JSON object, merged in order")
    schema = parents[0].get_schema() if parents else {"type": "object", "properties": {}}
    if isinstance((schema.get("properties") or {}).get("messages"), dict):
        notes.append("the input holds a conversation (messages): another stack must put its turns after the system "
                     "message itself")
    if generator.state.get("retrieval"):
        notes.append("demonstrations retrieved per input (KNNFewShot) are left out: only the fixed ones are exported")
    messages = generator.messages({}, input_schema=schema)
    messages[-1] = {"role": "user", "content": INPUT_SLOT}
    model = generator.language_model
    return ExportedPrompt(
        generator=generator.name, model=model.model, messages=messages, input_schema=schema,
        output_schema=generator._schema, temperature=generator.temperature if generator.temperature is not None
        else model.temperature, max_tokens=generator.max_tokens or model.max_tokens, seed=model.seed, notes=notes)
