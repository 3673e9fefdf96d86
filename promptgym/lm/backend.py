"""What every backend does: (messages, JSON schema, sampling) -> text and usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class LMRequest:
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None   # OpenAI ``tools`` (function specs), for native tool calling


@dataclass
class LMResponse:
    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: str | None = None       # the model's reasoning, when the server returns it (reasoning_content)
    finish_reason: str | None = None   # "stop", "length", "content_filter"... when the server says
    cost: float = 0.0                  # what the server billed for the call, when it says
    tool_calls: list[dict[str, Any]] | None = None  # native tool calls, OpenAI form (arguments as a JSON string)


@dataclass
class LMChunk:
    """A piece of a streamed answer; the last one says why it stopped and, when known, the tokens."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Backend(Protocol):
    """A model engine. ``concurrency`` bounds simultaneous requests.

    A backend that streams also has ``stream(request)``: an async iterator of
    :class:`LMChunk` whose ``aclose()`` stops the generation at once.
    """

    concurrency: int

    async def complete(self, request: LMRequest) -> LMResponse: ...


class EmbeddingBackend(Protocol):
    async def embed(self, texts: list[str]) -> list[list[float]]: ...
