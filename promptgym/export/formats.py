"""Exported prompts as text: ``messages`` (JSON), ``openai-json`` (request bodies), ``jinja`` (a ChatML template).

    render(exports, "messages", "qa")      # {"program", "input_slot", "generators": [...]}
    render(exports, "openai-json", "qa")   # one chat-completions body (a list for several Generators)
    render(exports, "jinja", "qa")         # render with input_json=<the input as JSON text>
"""

from __future__ import annotations

import json
from typing import Any

from promptgym.export.prompts import INPUT_SLOT, ExportedPrompt

FORMATS = ("messages", "openai-json", "jinja")


def render(exports: list[ExportedPrompt], format: str, program: str) -> str:
    if format == "messages":
        return _json({"program": program, "input_slot": INPUT_SLOT, "generators": [_messages(item) for item in exports]})
    if format == "openai-json":
        bodies = [item.request() for item in exports]
        if len(bodies) == 1:
            return _json(bodies[0])
        return _json([{"generator": item.generator, "request": body} for item, body in zip(exports, bodies)])
    if format == "jinja":
        return "\n".join(jinja_template(item, program) for item in exports)
    raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _messages(item: ExportedPrompt) -> dict[str, Any]:
    body = item.request()
    return {"generator": item.generator, "model": item.model, "messages": item.messages,
            "response_format": body.get("response_format"), "input_schema": item.input_schema,
            "temperature": item.temperature, "max_tokens": item.max_tokens, "seed": item.seed, "notes": item.notes}


def jinja_template(item: ExportedPrompt, program: str) -> str:
    """A ChatML text template (``<|im_start|>role ... <|im_end|>``) with ``{{ input_json }}`` for the input.

    Every fixed text is inside ``{% raw %}`` blocks, so braces in instructions or demonstrations
    render as they are.
    """
    lines = [f"{{#- promptgym export: program {program!r}, Generator {item.generator!r}, model {item.model!r}. "
             "Render with input_json = the input as JSON text; the answer follows the JSON schema of "
             "`promptgym export-prompt --format messages`. -#}"]
    for message in item.messages:
        content = "{{ input_json }}" if message["content"] == INPUT_SLOT else _raw(message["content"])
        lines.append(f"<|im_start|>{message['role']}\n{content}<|im_end|>")
    lines.append("<|im_start|>assistant\n")
    return "\n".join(lines)


def _raw(text: str) -> str:
    # "{% endraw %}" inside a text would close the block early: split it across two blocks.
    return "{% raw %}" + text.replace("{% endraw %}", "{% endraw %}{{ '{% endraw %}' }}{% raw %}") + "{% endraw %}"
