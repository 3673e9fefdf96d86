"""What every engine does: (messages, JSON schema, sampling) -> text and usage."""

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
    cached_tokens: int = 0             # prompt tokens the provider's prompt cache served, when it says
    cache_creation_tokens: int = 0     # prompt tokens written to the provider's cache (Anthropic), when it says
    reasoning_tokens: int = 0          # completion tokens spent reasoning, when it says


def usage_details(usage: dict[str, Any]) -> dict[str, int]:
    """``cached_tokens``, ``cache_creation_tokens`` and ``reasoning_tokens`` of an OpenAI-style ``usage`` object.

    >>> usage_details({"prompt_tokens_details": {"cached_tokens": 9}, "completion_tokens_details": None})
    {'cached_tokens': 9, 'cache_creation_tokens': 0, 'reasoning_tokens': 0}
    """
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return {"cached_tokens": int(prompt.get("cached_tokens") or usage.get("cache_read_input_tokens") or 0),
            "cache_creation_tokens": int(prompt.get("cache_creation_tokens")
                                         or usage.get("cache_creation_input_tokens") or 0),
            "reasoning_tokens": int(completion.get("reasoning_tokens") or 0)}


@dataclass
class LMChunk:
    """A piece of a streamed answer; the last one says why it stopped and, when known, the tokens."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Engine(Protocol):
    """A model engine. ``concurrency`` bounds simultaneous requests.

    An engine that streams also has ``stream(request)``: an async iterator of
    :class:`LMChunk` whose ``aclose()`` stops the generation at once.
    """

    concurrency: int

    async def complete(self, request: LMRequest) -> LMResponse: ...


class EmbeddingEngine(Protocol):
    async def embed(self, texts: list[str]) -> list[list[float]]: ...
