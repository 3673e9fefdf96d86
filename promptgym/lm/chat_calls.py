"""Calls in synalinks' form: ``await lm(ChatMessages(...), schema=...)`` answers with data models.

promptgym's own form takes a list of ``{"role", "content"}`` dicts and
answers with a dict (structured) or the text. Given chat messages instead
(a :class:`ChatMessages`, or a list of :class:`ChatMessage`), the model
answers as synalinks does: a :class:`JsonDataModel` of the schema, or an
assistant :class:`ChatMessage` (with the model's reasoning when the server
returns it).
"""

from __future__ import annotations

import json
from typing import Any

from promptgym.core.chat import ChatMessage, ChatRole


def is_chat_form(messages: Any) -> bool:
    """Whether ``messages`` are chat data models (not promptgym's plain dicts)."""
    if isinstance(messages, list):
        return bool(messages) and all(isinstance(message, ChatMessage) for message in messages)
    return hasattr(messages, "get_json") or isinstance(messages, dict)


def wire_messages(messages: Any) -> list[dict[str, Any]]:
    """Plain ``{"role", "content", ...}`` dicts for any accepted form of messages."""
    if isinstance(messages, list) and all(isinstance(message, dict) for message in messages):
        return list(messages)
    if isinstance(messages, list):
        items = [message.get_json() if hasattr(message, "get_json") else message for message in messages]
    else:
        data = messages.get_json() if hasattr(messages, "get_json") else messages
        items = data.get("messages", []) if isinstance(data, dict) else list(data)
    wire = []
    for item in items:
        role = item.get("role")
        message: dict[str, Any] = {"role": role.value if isinstance(role, ChatRole) else role}
        content = item.get("content")
        message["content"] = json.dumps(content, ensure_ascii=False) if isinstance(content, dict) else (content or "")
        for key in ("name", "tool_call_id", "tool_calls"):
            if item.get(key):
                message[key] = item[key]
        wire.append(message)
    return wire


def chat_answer(content: str, reasoning: str | None) -> ChatMessage:
    return ChatMessage(role=ChatRole.ASSISTANT, content=content, reasoning_content=reasoning)
