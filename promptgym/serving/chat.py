"""The OpenAI chat-completions surface: the request's shape, the program input it carries, the answer.

A program is called with ``model = <program name>``: the last user message's content is the
input JSON, the assistant's content is the output JSON. ``model = local/<name>`` chats with an
embedded (or fine-tuned) model directly. With ``stream: true`` the answer comes as the model
writes it (:mod:`promptgym.serving.streaming`): a program's last output field, a model's text.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from promptgym.lm.usage import Usage
from promptgym.serving.programs import InputError

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """The fields promptgym reads; any other OpenAI field is accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    top_p: float | None = Field(None, gt=0, le=1)
    response_format: dict[str, Any] | None = None


def requested_schema(request: ChatCompletionRequest) -> dict[str, Any] | None:
    """The JSON schema a direct model call must follow (``json_schema``, or ``json_object`` with a schema)."""
    form = request.response_format or {}
    if form.get("type") == "json_schema":
        schema = (form.get("json_schema") or {}).get("schema")
    elif form.get("type") == "json_object":
        schema = form.get("schema") or {"type": "object"}
    else:
        return None
    if not isinstance(schema, dict):
        raise InputError("response_format: expected a JSON schema object under json_schema.schema",
                         "response_format", status=400)
    return schema


def message_text(message: ChatMessageIn, where: str) -> str:
    """A message's text: the string, or its text parts joined (images and other parts are refused)."""
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    texts = []
    for index, part in enumerate(message.content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise InputError(f"{where}[{index}]: only text parts are supported (type 'text' with a 'text' string), "
                             f"got type {part.get('type')!r}", f"{where}[{index}]", status=400)
        texts.append(part["text"])
    return "".join(texts)


def program_input(request: ChatCompletionRequest, fields: list[str]) -> tuple[Any, str]:
    """The JSON object of the last user message, and its field path for errors."""
    for index in range(len(request.messages) - 1, -1, -1):
        message = request.messages[index]
        if message.role != "user":
            continue
        where = f"messages[{index}].content"
        text = message_text(message, where).strip()
        try:
            return json.loads(text), where
        except json.JSONDecodeError as error:
            wanted = f" with the fields {', '.join(fields)}" if fields else ""
            raise InputError(f"{where}: expected the program's input as a JSON object{wanted}; the text is not JSON "
                             f"({error.msg} at line {error.lineno} column {error.colno})", where, status=400) from None
    raise InputError("messages: no user message; the last user message carries the program's input as a JSON "
                     "object", "messages", status=400)


def plain_messages(request: ChatCompletionRequest) -> list[dict[str, str]]:
    """The conversation as role/content strings, for a model called directly."""
    return [{"role": "system" if message.role == "developer" else message.role,
             "content": message_text(message, f"messages[{index}].content")}
            for index, message in enumerate(request.messages)]


def completion(request_id: str, model: str, content: str, usage: Usage, finish_reason: str = "stop") -> dict[str, Any]:
    """A ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-{request_id}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "logprobs": None,
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                  "total_tokens": usage.prompt_tokens + usage.completion_tokens},
    }
