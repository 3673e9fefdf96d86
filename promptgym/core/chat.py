"""Chat messages as data models: what a Generator without an output DataModel reads and answers.

    messages = ChatMessages(messages=[ChatMessage(role="user", content="Hi!")])
    reply = await Generator(language_model=lm)(messages)    # a ChatMessage, role "assistant"

The fields are those of an OpenAI chat-completion message (see
:mod:`promptgym.core.chat_completions` for the wire form), except that tool
call arguments are kept as parsed JSON.
"""

from __future__ import annotations

import warnings
from enum import Enum
from typing import Any, Literal, Optional, Union

import pydantic

from promptgym.core.data_model import DataModel, Field


__all__ = [
    "ChatMessage",
    "ChatMessages",
    "ChatRole",
    "ToolCall",
    "ToolCallFunction",
    "is_chat_message",
    "is_chat_messages",
    "is_strictly_chat_message",
    "is_strictly_chat_messages",
    "is_tool_call",
]


class ChatRole(str, Enum):
    SYSTEM = "system"
    DEVELOPER = "developer"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    FUNCTION = "function"


class ToolCallFunction(DataModel):
    """Which function a tool call names, and its arguments (parsed JSON, or the wire's JSON string)."""

    name: str = Field(description="The function to call")
    arguments: Union[dict[str, Any], str] = Field(default_factory=dict, description="Its arguments")


class ToolCall(DataModel):
    id: str = Field(description="The call's id, which the tool's answer refers to")
    type: Literal["function"] = Field(default="function", description="Always 'function'")
    function: ToolCallFunction = Field(description="The function and its arguments")


class ChatMessage(DataModel):
    """One message of a conversation."""

    role: ChatRole = Field(description="Who speaks")
    reasoning_content: Optional[str] = Field(default=None, description="The model's reasoning, when it shows it")
    thinking_blocks: Optional[list[dict[str, Any]]] = Field(default=None, description="Provider reasoning blocks")
    content: Optional[Union[str, list[dict[str, Any]], dict[str, Any]]] = Field(default=None,
                                                                                description="What is said")
    tool_call_id: Optional[str] = Field(default=None, description="For a tool's answer: the call it answers")
    tool_calls: Optional[list[ToolCall]] = Field(default=None, description="Tools the assistant calls")
    name: Optional[str] = Field(default=None, description="The author's name")
    refusal: Optional[str] = Field(default=None, description="The model's refusal, if it refused")
    audio: Optional[dict[str, Any]] = Field(default=None, description="Audio output")

    @pydantic.model_validator(mode="before")
    @classmethod
    def _thinking_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "thinking" in data:
            warnings.warn("ChatMessage(thinking=...) is deprecated: use reasoning_content=", DeprecationWarning,
                          stacklevel=4)
            data = dict(data)
            data.setdefault("reasoning_content", data.pop("thinking"))
        return data

    @property
    def thinking(self) -> Optional[str]:
        warnings.warn("ChatMessage.thinking is deprecated: use reasoning_content", DeprecationWarning, stacklevel=2)
        return self.reasoning_content

    def get_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ChatMessages(DataModel):
    """A conversation."""

    messages: list[ChatMessage] = Field(default_factory=list, description="The messages, oldest first")


def _fields(value: Any) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, dict):
        return set(value)
    schema = value.get_schema() if callable(getattr(value, "get_schema", None)) else {}
    return set(schema.get("properties", {}))


def is_chat_message(value: Any) -> bool:
    """Whether ``value`` (a value, class or schema holder) has a chat message's role and content."""
    return {"role", "content"} <= _fields(value)


def is_strictly_chat_message(value: Any) -> bool:
    return is_chat_message(value) and _fields(value) <= set(ChatMessage.model_fields)


def is_chat_messages(value: Any) -> bool:
    """Whether ``value`` holds a ``messages`` list."""
    return "messages" in _fields(value)


def is_strictly_chat_messages(value: Any) -> bool:
    return _fields(value) == {"messages"}


def is_tool_call(value: Any) -> bool:
    return {"id", "function"} <= _fields(value)
