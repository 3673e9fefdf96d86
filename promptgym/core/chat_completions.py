"""The OpenAI chat-completions wire format as data models, and conversions from/to :mod:`chat` messages.

On the wire a tool call's arguments are a JSON string and a tool's answer is
text; in a :class:`ChatMessage` both are parsed JSON. The conversions keep
every field (the two message types have the same keys)::

    wire = to_chat_completion_message(ChatMessage(role="tool", tool_call_id="c0", content={"x": 1}))
    wire.content                                    # '{"x": 1}'
    from_chat_completion_message(wire).content      # '{"x": 1}' (a tool's answer stays text once sent)
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional, Union

from promptgym.core.chat import ChatMessage, ChatMessages, ChatRole, ToolCall, ToolCallFunction
from promptgym.core.data_model import DataModel, Field

__all__ = [
    "ChatCompletionChoice",
    "ChatCompletionCompletionTokensDetails",
    "ChatCompletionFunctionCall",
    "ChatCompletionJsonSchema",
    "ChatCompletionMessage",
    "ChatCompletionPromptTokensDetails",
    "ChatCompletionRequest",
    "ChatCompletionResponse",
    "ChatCompletionResponseFormat",
    "ChatCompletionTool",
    "ChatCompletionToolCall",
    "ChatCompletionToolFunction",
    "ChatCompletionUsage",
    "from_chat_completion_message",
    "from_chat_completion_messages",
    "to_chat_completion_message",
    "to_chat_completion_messages",
    "to_chat_completion_request",
]


Role = Literal["developer", "system", "user", "assistant", "tool", "function"]


class ChatCompletionFunctionCall(DataModel):
    name: str = Field(description="The function's name")
    arguments: Union[str, dict[str, Any]] = Field(default="{}", description="JSON-encoded arguments")


class ChatCompletionToolCall(DataModel):
    id: str = Field(description="The call's id")
    type: Literal["function"] = Field(default="function", description="Always 'function'")
    function: ChatCompletionFunctionCall = Field(description="The function called")


class ChatCompletionMessage(DataModel):
    role: Role = Field(description="Who speaks")
    content: Optional[Union[str, list[dict[str, Any]]]] = Field(default=None, description="Text or content parts")
    name: Optional[str] = Field(default=None, description="The author's name")
    tool_calls: Optional[list[ChatCompletionToolCall]] = Field(default=None, description="Tools called")
    tool_call_id: Optional[str] = Field(default=None, description="The call a tool message answers")
    refusal: Optional[str] = Field(default=None, description="A refusal")
    audio: Optional[dict[str, Any]] = Field(default=None, description="Audio output")
    reasoning_content: Optional[str] = Field(default=None, description="The model's reasoning")
    thinking_blocks: Optional[list[dict[str, Any]]] = Field(default=None, description="Provider reasoning blocks")


class ChatCompletionToolFunction(DataModel):
    name: str = Field(description="The function's name")
    description: Optional[str] = Field(default=None, description="What it does")
    parameters: Optional[dict[str, Any]] = Field(default=None, description="JSON schema of its arguments")
    strict: Optional[bool] = Field(default=None, description="Whether arguments must follow the schema exactly")


class ChatCompletionTool(DataModel):
    type: Literal["function"] = Field(default="function", description="Always 'function'")
    function: ChatCompletionToolFunction = Field(description="The function offered")


class ChatCompletionJsonSchema(DataModel):
    name: str = Field(description="The schema's name")
    description: Optional[str] = Field(default=None, description="What the answer is")
    schema_: Optional[dict[str, Any]] = Field(default=None, alias="schema", description="The JSON schema")
    strict: Optional[bool] = Field(default=None, description="Whether the answer must follow it exactly")

    model_config = {"extra": "forbid", "populate_by_name": True}


class ChatCompletionResponseFormat(DataModel):
    type: Literal["text", "json_object", "json_schema"] = Field(description="The kind of answer")
    json_schema: Optional[ChatCompletionJsonSchema] = Field(default=None, description="For json_schema")


class ChatCompletionRequest(DataModel):
    model: str = Field(description="The model")
    messages: list[ChatCompletionMessage] = Field(description="The conversation")
    tools: Optional[list[ChatCompletionTool]] = None
    tool_choice: Optional[Union[str, dict[str, Any]]] = None
    response_format: Optional[ChatCompletionResponseFormat] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    n: Optional[int] = None
    max_tokens: Optional[int] = None
    max_completion_tokens: Optional[int] = None
    stop: Optional[Union[str, list[str]]] = None
    presence_penalty: Optional[float] = None
    frequency_penalty: Optional[float] = None
    seed: Optional[int] = None
    stream: Optional[bool] = None
    reasoning_effort: Optional[str] = None


class ChatCompletionPromptTokensDetails(DataModel):
    cached_tokens: Optional[int] = None
    audio_tokens: Optional[int] = None


class ChatCompletionCompletionTokensDetails(DataModel):
    reasoning_tokens: Optional[int] = None
    audio_tokens: Optional[int] = None
    accepted_prediction_tokens: Optional[int] = None
    rejected_prediction_tokens: Optional[int] = None


class ChatCompletionUsage(DataModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: Optional[ChatCompletionPromptTokensDetails] = None
    completion_tokens_details: Optional[ChatCompletionCompletionTokensDetails] = None


class ChatCompletionChoice(DataModel):
    index: int = 0
    message: ChatCompletionMessage
    finish_reason: Optional[str] = None
    logprobs: Optional[dict[str, Any]] = None


class ChatCompletionResponse(DataModel):
    id: str = ""
    object: Literal["chat.completion"] = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[ChatCompletionChoice] = Field(default_factory=list)
    usage: Optional[ChatCompletionUsage] = None


def _wire_content(message: ChatMessage) -> Any:
    content = message.content
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    if message.tool_calls and content in ("", None):
        return None
    return content


def to_chat_completion_message(message: Any) -> ChatCompletionMessage:
    """A :class:`ChatMessage` (or its JSON) on the wire: arguments and dict contents JSON-encoded."""
    message = message if isinstance(message, ChatMessage) else ChatMessage.model_validate(
        message.get_json() if hasattr(message, "get_json") else message)
    tool_calls = None
    if message.tool_calls:
        tool_calls = [ChatCompletionToolCall(id=call.id, function=ChatCompletionFunctionCall(
            name=call.function.name,
            arguments=call.function.arguments if isinstance(call.function.arguments, str)
            else json.dumps(call.function.arguments, ensure_ascii=False))) for call in message.tool_calls]
    return ChatCompletionMessage(role=message.role.value, content=_wire_content(message), name=message.name,
                                 tool_calls=tool_calls, tool_call_id=message.tool_call_id, refusal=message.refusal,
                                 audio=message.audio, reasoning_content=message.reasoning_content,
                                 thinking_blocks=message.thinking_blocks)


def _parsed(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def from_chat_completion_message(wire: Any) -> ChatMessage:
    """A wire message as a :class:`ChatMessage`; the legacy ``function`` role becomes ``tool``."""
    wire = wire if isinstance(wire, ChatCompletionMessage) else ChatCompletionMessage.model_validate(wire)
    role, tool_call_id = ChatRole(wire.role), wire.tool_call_id
    if role is ChatRole.FUNCTION:
        role, tool_call_id = ChatRole.TOOL, tool_call_id or wire.name
    tool_calls = [ToolCall(id=call.id, function=ToolCallFunction(name=call.function.name,
                                                                 arguments=_parsed(call.function.arguments)))
                  for call in wire.tool_calls] if wire.tool_calls else None
    return ChatMessage(role=role, content=wire.content, name=wire.name, tool_calls=tool_calls, tool_call_id=tool_call_id,
                       refusal=wire.refusal, audio=wire.audio, reasoning_content=wire.reasoning_content,
                       thinking_blocks=wire.thinking_blocks)


def to_chat_completion_messages(messages: Any) -> list[ChatCompletionMessage]:
    items = messages.messages if isinstance(messages, ChatMessages) else messages.get("messages", []) \
        if hasattr(messages, "get") and not isinstance(messages, list) else messages
    return [to_chat_completion_message(message) for message in items]


def from_chat_completion_messages(messages: list[Any]) -> ChatMessages:
    return ChatMessages(messages=[from_chat_completion_message(message) for message in messages])


def to_chat_completion_request(messages: Any, model: str, **options: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest(model=model, messages=to_chat_completion_messages(messages), **options)
