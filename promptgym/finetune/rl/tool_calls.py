"""Tool calling on the RL policy server: OpenAI ``tools``/``tool_calls`` in, text the policy reads and writes.

A request with ``tools`` (or a history holding tool calls and results) is turned into plain chat
messages before the chat template is applied, the same way for every model:

* the tools are listed in the system message, with the format of a call:
  ``<tool_call>{"name": "calculate", "arguments": {"expression": "2 + 2"}}</tool_call>``;
* an assistant turn that called tools is its text followed by one such block per call;
* a tool result is a user turn ``<tool_response>{...}</tool_response>``.

The policy's reply is read back: each well-formed ``<tool_call>`` block becomes an OpenAI
``tool_calls`` entry (arguments as a JSON string), the rest of the text its content. The update
then trains on the reply's tokens only; tool results are prompt (context), never targets.

>>> parse_reply('Let me add. <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')[1][0]["function"]
{'name': 'add', 'arguments': '{"a": 1}'}
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(re.escape(CALL_OPEN) + r"\s*(.*?)\s*(?:" + re.escape(CALL_CLOSE) + r"|$)", re.S)


def uses_tools(body: dict[str, Any]) -> bool:
    """Whether a chat request carries tools or a history of tool calls."""
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    return bool(body.get("tools")) or any(isinstance(m, dict) and (m.get("tool_calls") or m.get("role") == "tool")
                                          for m in messages)


def tools_prompt(tools: list[Any]) -> str:
    """The system text that lists ``tools`` (OpenAI function specs) and the call format."""
    specs = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ValueError("tools: each tool must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}")
        specs.append(json.dumps({"name": function["name"], "description": function.get("description", ""),
                                 "parameters": function.get("parameters", {})}, ensure_ascii=False))
    return ("You may call these tools:\n" + "\n".join(specs) + "\n\nTo call one, write "
            f'{CALL_OPEN}{{"name": <tool name>, "arguments": {{...}}}}{CALL_CLOSE}; the result comes back as '
            "<tool_response>. When you have the answer, write it without a tool call.")


def as_text_messages(body: dict[str, Any]) -> dict[str, Any]:
    """The request with its tools and tool turns written into plain ``{role, content}`` messages."""
    messages = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            raise ValueError("messages: expected a list of objects")
        role, content = message.get("role"), message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        if role == "tool":
            messages.append({"role": "user", "content": f"<tool_response>{content}</tool_response>"})
            continue
        calls = [_call_text(call) for call in message.get("tool_calls") or []]
        messages.append({"role": role, "content": "\n".join(part for part in [content, *calls] if part)})
    tools = body.get("tools") or []
    if tools:
        listing = tools_prompt(tools)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + listing}
        else:
            messages.insert(0, {"role": "system", "content": listing})
    return {**{key: value for key, value in body.items() if key != "tools"}, "messages": messages}


def _call_text(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise ValueError("tool_calls: each call must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}")
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return CALL_OPEN + json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False) + CALL_CLOSE


def parse_reply(text: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    """(the reply's text without its calls, its tool calls in the OpenAI form) of a policy reply.

    A reply that is nothing but one call object, without the ``<tool_call>`` tags, is a call too: models
    trained on other tool formats (Qwen2.5 asked for this one) often write just the JSON.

    >>> parse_reply('{"name": "add", "arguments": {"a": 1}}')[1][0]["function"]["name"]
    'add'
    """
    calls = [call for call in map(_as_call, (match.group(1) for match in _CALL.finditer(text))) if call]
    if calls:
        return _CALL.sub("", text).strip() or None, calls
    bare = _as_call(text.strip()) if text.strip().startswith("{") else None
    return (None, [bare]) if bare else (text, None)


def _as_call(text: str) -> dict[str, Any] | None:
    """An OpenAI ``tool_calls`` entry from ``{"name": ..., "arguments": {...}}`` text, or None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(value, dict) and isinstance(value.get("name"), str)):
        return None
    arguments = value.get("arguments") if isinstance(value.get("arguments"), dict) else {}
    return {"id": f"call_{secrets.token_hex(4)}", "type": "function",
            "function": {"name": value["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}}


def reply_message(text: str, with_tools: bool) -> tuple[dict[str, Any], str | None]:
    """The assistant message for a reply, and the finish reason it implies (``"tool_calls"``, or None)."""
    if not with_tools:
        return {"role": "assistant", "content": text}, None
    content, calls = parse_reply(text)
    if not calls:
        return {"role": "assistant", "content": text}, None
    return {"role": "assistant", "content": content, "tool_calls": calls}, "tool_calls"
