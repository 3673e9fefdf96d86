"""synalinks' tests mock ``litellm.acompletion`` / ``litellm.aembedding``; this routes promptgym's models there.

The harness installs a stand-in ``litellm`` module (synalinks' LM library;
promptgym does not use it) and gives every promptgym LanguageModel and
EmbeddingModel a backend that calls ``litellm.acompletion`` /
``litellm.aembedding`` at call time, so ``mock.patch("litellm.acompletion")``
in a test decides the answer, as it does for synalinks.

Unpatched, the stand-in answers with a JSON object that fills the requested
schema with placeholder values (what the doc blocks run against: they were
written for a real model and only need well-formed answers).
"""

from __future__ import annotations

import hashlib
import json
import sys
import types
from typing import Any

from promptgym.lm.engine import LMRequest, LMResponse

try:
    from promptgym.lm.engine import LMChunk
except ImportError:  # a promptgym from before streaming (measuring the "before" numbers of issue 19)
    LMChunk = None  # type: ignore[assignment,misc]


def placeholder(schema: dict[str, Any] | None, defs: dict[str, Any] | None = None, name: str = "value") -> Any:
    """A value that validates against ``schema``: first enum/const, minimum lengths, "placeholder" strings."""
    schema = schema or {}
    defs = {**(defs or {}), **schema.get("$defs", {})}
    if "$ref" in schema:
        return placeholder(defs.get(schema["$ref"].split("/")[-1], {}), defs, name)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [option for option in schema[key] if option.get("type") != "null"] or schema[key]
            return placeholder(options[0], defs, name)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        return {key: placeholder(value, defs, key) for key, value in properties.items()}
    if kind == "array":
        return [placeholder(schema.get("items", {}), defs, name) for _ in range(schema.get("minItems", 1))]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = f"placeholder {name}"
    return text.ljust(schema.get("minLength", 0), "x")[: schema.get("maxLength", len(text) + 1000)]


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if "json_schema" in response_format:
        return response_format["json_schema"].get("schema")
    return response_format.get("schema")


async def default_acompletion(model: str = "", messages: Any = None, response_format: Any = None, **kwargs: Any) -> dict[str, Any]:
    schema = _schema_of(response_format)
    content = json.dumps(placeholder(schema)) if schema else "placeholder answer"
    return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


async def default_aembedding(model: str = "", input: Any = None, **kwargs: Any) -> dict[str, Any]:
    def vector(text: str) -> list[float]:
        digest = hashlib.sha256(str(text).encode()).digest()
        return [byte / 255.0 for byte in digest[:16]]

    return {"data": [{"embedding": vector(text), "index": i} for i, text in enumerate(input or [])]}


class LiteLLMRecord(dict):
    """Stands for litellm's response types (``ModelResponse``, ``Usage``, ...): a dict with attribute access."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


LITELLM_TYPES = ("ModelResponse", "Message", "Usage", "Choices", "StreamingChoices", "Delta", "Embedding",
                 "EmbeddingResponse", "PromptTokensDetailsWrapper", "CompletionTokensDetailsWrapper", "ServerToolUse",
                 "ChatCompletionMessageToolCall", "Function")


def make_litellm_module() -> types.ModuleType:
    module = types.ModuleType("litellm")
    module.__path__ = []  # type: ignore[attr-defined]
    types_module = types.ModuleType("litellm.types")
    types_module.__path__ = []  # type: ignore[attr-defined]
    utils_module = types.ModuleType("litellm.types.utils")
    for name in LITELLM_TYPES:
        setattr(utils_module, name, type(name, (LiteLLMRecord,), {}))
    types_module.utils = utils_module  # type: ignore[attr-defined]
    module.types = types_module  # type: ignore[attr-defined]
    sys.modules.update({"litellm.types": types_module, "litellm.types.utils": utils_module})
    module.acompletion = default_acompletion  # type: ignore[attr-defined]
    module.aembedding = default_aembedding  # type: ignore[attr-defined]
    module.supports_reasoning = lambda model=None, **_: False  # type: ignore[attr-defined]
    module.drop_params = True  # type: ignore[attr-defined]
    return module


async def _aiter(items: Any) -> Any:
    for item in items:
        yield item


def _plain(value: Any) -> Any:
    """litellm's records (or dicts) as plain JSON values: what the OpenAI wire carries."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


class LiteLLMBackend:
    """A promptgym backend that asks ``litellm.acompletion`` (looked up at call time, so patches apply).

    It stands where promptgym's HTTP client stands, so it does what that
    client does with a failing server: try ``attempts`` times, then raise
    an LMConnectionError.
    """

    def __init__(self, model: str, concurrency: int = 8, attempts: int = 3) -> None:
        self.model = model
        self.concurrency = concurrency
        self.attempts = max(1, attempts)

    async def _retrying(self, call: Any) -> Any:
        from promptgym.lm.errors import LMConnectionError

        for attempt in range(self.attempts):
            try:
                return await call()
            except Exception as error:  # noqa: BLE001 - whatever the mocked server raised
                if attempt == self.attempts - 1:
                    raise LMConnectionError(f"{self.model}: {error}") from error
        return None

    def _kwargs(self, request: LMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages,
                                  "temperature": request.temperature, "max_tokens": request.max_tokens, **request.extra}
        if getattr(request, "tools", None):
            kwargs["tools"] = request.tools
        if request.schema is not None:
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "structured_output", "schema": request.schema, "strict": True}}
        return kwargs

    async def stream(self, request: LMRequest) -> Any:
        litellm = sys.modules["litellm"]
        response = await litellm.acompletion(**self._kwargs(request), stream=True)
        chunks = response if hasattr(response, "__aiter__") else _aiter(response)
        async for chunk in chunks:
            delta = _get((_get(chunk, "choices") or [{}])[0], "delta") or {}
            yield LMChunk(content=_get(delta, "content") or "", reasoning=_get(delta, "reasoning_content") or "")

    async def complete(self, request: LMRequest) -> LMResponse:
        litellm = sys.modules["litellm"]
        response = await self._retrying(lambda: litellm.acompletion(**self._kwargs(request)))
        choices = _get(response, "choices") or []
        if not choices:
            raise RuntimeError("empty response from the (mocked) language model: no choices")
        message = _get(choices[0], "message") or {}
        content = _get(message, "content")
        if content is None:
            content = ""
        usage = _get(response, "usage") or {}
        extra = {"tool_calls": _plain(_get(message, "tool_calls")) or None} if "tool_calls" in LMResponse.__dataclass_fields__ else {}
        hidden = getattr(response, "_hidden_params", None) or {}
        if "cost" in LMResponse.__dataclass_fields__ and isinstance(hidden, dict):
            extra["cost"] = float(hidden.get("response_cost") or 0.0)  # litellm's computed cost of the call
        if "cached_tokens" in LMResponse.__dataclass_fields__:
            prompt_details = _plain(_get(usage, "prompt_tokens_details")) or {}
            completion_details = _plain(_get(usage, "completion_tokens_details")) or {}
            extra.update(cached_tokens=int(_get(prompt_details, "cached_tokens", 0) or 0),
                         cache_creation_tokens=int(_get(prompt_details, "cache_creation_tokens", 0) or 0),
                         reasoning_tokens=int(_get(completion_details, "reasoning_tokens", 0) or 0))
        return LMResponse(content=content if isinstance(content, str) else json.dumps(content),
                          prompt_tokens=int(_get(usage, "prompt_tokens", 0) or 0),
                          completion_tokens=int(_get(usage, "completion_tokens", 0) or 0),
                          reasoning=_get(message, "reasoning_content"), finish_reason=_get(choices[0], "finish_reason"),
                          **extra)

    async def embed(self, texts: list[str]) -> tuple[list[list[float]], Any]:
        """The vectors and what litellm's response says the call cost (tokens, cached tokens, cost)."""
        from promptgym.lm.usage import Usage

        litellm = sys.modules["litellm"]
        response = await self._retrying(lambda: litellm.aembedding(model=self.model, input=texts))
        usage = _get(response, "usage")
        details = _plain(_get(usage, "prompt_tokens_details")) or {}
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = float(hidden.get("response_cost") or 0.0) if isinstance(hidden, dict) else 0.0
        spent = Usage(prompt_tokens=int(_get(usage, "prompt_tokens", 0) or 0),
                      cached_tokens=int(_get(details, "cached_tokens", 0) or 0), cost=cost)
        return [list(_get(item, "embedding")) for item in _get(response, "data")], spent


def install() -> None:
    """Put the stand-in ``litellm`` in ``sys.modules`` and point promptgym's models at it."""
    sys.modules["litellm"] = make_litellm_module()
    from promptgym.lm.embedding_model import EmbeddingModel
    from promptgym.lm.language_model import LanguageModel

    def make_backend(self: LanguageModel) -> LiteLLMBackend:
        return LiteLLMBackend(self.model, concurrency=self.concurrency or 8, attempts=self.retries)

    async def embed(self: EmbeddingModel, texts: list[str]) -> Any:
        return await LiteLLMBackend(self.model, attempts=self.retries).embed(texts)  # (vectors, usage)

    LanguageModel._make_engine = make_backend  # type: ignore[method-assign]
    EmbeddingModel._embed_with_usage = embed  # type: ignore[method-assign]
