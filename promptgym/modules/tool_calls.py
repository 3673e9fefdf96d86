"""Tool calls as data: the constrained JSON choice an engine without native tool calling decodes, and back.

An agent keeps its trajectory in the OpenAI form (an assistant message with
``tool_calls``, then one ``tool`` message per call). A server that calls tools
natively gets that form as is. The embedded engine gets a JSON schema instead,
one object with either tool calls or the final answer:

    {"tool_calls": [{"tool_name": "calculate", "arguments": {"expression": "2 + 2"}}]}
    {"final_answer": {...the agent's output fields...}}

Each call's ``arguments`` is constrained to that tool's own parameter schema
(``anyOf`` over the tools, ``tool_name`` a constant), so grammar-constrained
decoding can't produce a call to an unknown tool or with wrong arguments.
The trajectory is shown to such a model in the same JSON (its own turns) and
the tool results as a user turn.

>>> schema = choice_schema([{"name": "add", "parameters": {"type": "object", "properties": {}}}], None)
>>> sorted(schema["anyOf"][0]["properties"])
['tool_calls']
"""

from __future__ import annotations

import json
from typing import Any

TOOL_RESULTS_PREFIX = "Tool results:"


def choice_schema(tools: list[dict[str, Any]], final_schema: dict[str, Any] | None, *, thinking: bool = False,
                  max_calls: int = 4, final_only: bool = False) -> dict[str, Any]:
    """The schema of one agent step: call tools (1 to ``max_calls``), or answer.

    ``tools`` are ``{"name", "parameters"}``; ``final_schema`` is the answer's
    object schema (None: the answer is text). ``final_only`` leaves only the
    answer (the step after ``max_iterations``).
    """
    calls = [{"type": "object", "additionalProperties": False, "required": ["tool_name", "arguments"],
              "properties": {"tool_name": {"const": tool["name"]}, "arguments": _strict(tool["parameters"])}}
             for tool in tools]
    lead = {"thinking": {"type": "string", "description": "What you know so far and what to do next",
                         "maxLength": 600}} if thinking else {}
    call_option = {"type": "object", "additionalProperties": False, "required": [*lead, "tool_calls"],
                   "properties": {**lead, "tool_calls": {"type": "array", "minItems": 1, "maxItems": max(1, max_calls),
                                                         "items": calls[0] if len(calls) == 1 else {"anyOf": calls}}}}
    answer = final_schema if final_schema is not None else {"type": "string", "maxLength": 2000}
    final_option = {"type": "object", "additionalProperties": False, "required": [*lead, "final_answer"],
                    "properties": {**lead, "final_answer": answer}}
    options = [final_option] if final_only or not tools else [call_option, final_option]
    return {"title": "AgentStep", "anyOf": options}


def _strict(parameters: dict[str, Any]) -> dict[str, Any]:
    """A parameter schema for the grammar: only what describes values (titles and descriptions dropped)."""
    if not isinstance(parameters, dict):
        return parameters
    kept = {key: value for key, value in parameters.items() if key not in ("title", "description", "default")}
    if isinstance(kept.get("properties"), dict):
        kept["properties"] = {name: _strict(value) for name, value in kept["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(kept.get(key), dict):
            kept[key] = _strict(kept[key])
    if isinstance(kept.get("anyOf"), list):
        kept["anyOf"] = [_strict(option) for option in kept["anyOf"]]
    return kept


def openai_tool_calls(choice: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The ``tool_calls`` of a constrained step, in the OpenAI form (arguments parsed), ids ``<prefix>_<i>``."""
    return [{"id": f"{prefix}_{index}", "type": "function",
             "function": {"name": call.get("tool_name"), "arguments": call.get("arguments") or {}}}
            for index, call in enumerate(choice.get("tool_calls") or [])]


def parse_arguments(arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A call's arguments as a dict (a server sends a JSON string), or the reason they can't be read."""
    if isinstance(arguments, dict):
        return arguments, None
    if arguments in (None, ""):
        return {}, None
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError) as error:
        return None, f"the arguments are not JSON ({error})"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def constrained_turns(messages: list[dict[str, Any]], thinking: bool = False) -> list[dict[str, str]]:
    """A trajectory in OpenAI form as the turns a model without native tool calls reads.

    Assistant tool calls become the JSON it would have written; consecutive
    tool results become one user turn; other messages pass as text.
    """
    turns: list[dict[str, str]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            turns.append({"role": "user", "content": f"{TOOL_RESULTS_PREFIX} " + json.dumps(pending, ensure_ascii=False)})
            pending.clear()

    names: dict[str, str] = {}
    for message in messages:
        role = _role(message)
        if role == "tool":
            pending.append({"tool_name": names.get(message.get("tool_call_id") or "", message.get("name") or ""),
                            "result": message.get("content")})
            continue
        flush()
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                names[call.get("id") or ""] = function.get("name", "")
                arguments, _ = parse_arguments(function.get("arguments"))
                calls.append({"tool_name": function.get("name"), "arguments": arguments or {}})
            step: dict[str, Any] = {"thinking": message.get("content") or ""} if thinking else {}
            turns.append({"role": "assistant", "content": json.dumps({**step, "tool_calls": calls}, ensure_ascii=False)})
            continue
        content = message.get("content")
        turns.append({"role": role, "content": content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)})
    flush()
    return turns


def _role(message: dict[str, Any]) -> str:
    role = message.get("role")
    return getattr(role, "value", role) or "user"
