"""Test doubles: a scripted language model and a deterministic embedding model.

    lm = ScriptedLanguageModel(responses=[{"answer": "Paris"}, RuntimeError("boom")])
    await lm(messages, schema=...)   # -> {"answer": "Paris"}
    await lm(messages, schema=...)   # raises RuntimeError("boom")
    lm.requests                      # every request, in order

``respond=`` takes a function of the request instead (for answers that
depend on the input); ``fail_on=`` makes chosen calls fail. A streamed call
(``lm.stream(...)``) hands the answer over word by word, ``stream_delay_s``
apart; ``lm.streams`` counts the streams started, read to the end, and
stopped by a reader that left. :func:`qa_run_config` writes the text of a
small ``promptgym train`` config, for tests and benches of the command line.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import numpy as np

from promptgym.core.serialization import register_builtin
from promptgym.lm.engine import LMChunk, LMRequest, LMResponse
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.errors import LMConnectionError
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.prices import Price

Responder = Callable[[LMRequest], Any]


def last_user_json(request: LMRequest) -> dict[str, Any]:
    """The JSON input a Generator put in the last user message."""
    return json.loads(request.messages[-1]["content"])


@dataclass
class StreamCounts:
    """What a scripted model's streams did: started, read to the end, stopped early; pieces handed over."""

    started: int = 0
    finished: int = 0
    stopped: int = 0
    pieces: int = 0

    @property
    def open(self) -> int:
        return self.started - self.finished - self.stopped


def stream_pieces(text: str) -> list[str]:
    """``text`` cut after each word's trailing spaces (the pieces join back to it).

    >>> stream_pieces('{"a": "b c"}')
    ['{"a": ', '"b ', 'c"}']
    """
    return re.findall(r"\s+|\S+\s*", text)


class ScriptedEngine:
    def __init__(self, responses: list[Any] | None, respond: Responder | None, fail_on: Callable[[int], bool] | None,
                 concurrency: int, delay_s: float, native_tools: bool = False, stream_delay_s: float = 0.0) -> None:
        self.native_tools = native_tools
        self.stream_delay_s = stream_delay_s
        self.streams = StreamCounts()
        self.responses = list(responses or [])
        self.respond = respond
        self.fail_on = fail_on
        self.concurrency = concurrency
        self.delay_s = delay_s
        self.requests: list[LMRequest] = []
        self._lock = threading.Lock()

    async def complete(self, request: LMRequest) -> LMResponse:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_on is not None and self.fail_on(index):
            raise LMConnectionError(f"scripted failure on call {index}")
        if self.respond is not None:
            answer = self.respond(request)
        elif self.responses:
            answer = self.responses[index % len(self.responses)]
        else:
            raise AssertionError(f"ScriptedLanguageModel has no response for call {index}")
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, LMResponse):  # a responder that sets the finish reason or the counts itself
            return answer
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in request.messages)
        if self.native_tools and isinstance(answer, dict) and "tool_calls" in answer and request.tools:
            calls = [{"id": call.get("id", f"call_{index}_{i}"), "type": "function",
                      "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))}}
                     for i, call in enumerate(answer["tool_calls"])]
            content = answer.get("content") or ""
            return LMResponse(content=content, prompt_tokens=prompt_tokens, completion_tokens=len(content.split()) + 1,
                              tool_calls=calls or None)
        content = answer if isinstance(answer, str) else json.dumps(answer)
        return LMResponse(content=content, prompt_tokens=prompt_tokens, completion_tokens=len(content.split()))

    async def stream(self, request: LMRequest) -> AsyncIterator[LMChunk]:
        response = await self.complete(request)
        self.streams.started += 1
        done = False
        try:
            for piece in stream_pieces(response.content):
                if self.stream_delay_s:
                    await asyncio.sleep(self.stream_delay_s)
                self.streams.pieces += 1
                yield LMChunk(content=piece)
            yield LMChunk(finish_reason=response.finish_reason or "stop", prompt_tokens=response.prompt_tokens,
                          completion_tokens=response.completion_tokens)
            done = True
        finally:
            if done:
                self.streams.finished += 1
            else:
                self.streams.stopped += 1


SCRIPTED_PRICE = Price(0.0, 0.0, source="scripted")
"""A scripted model's default price: a test double bills nobody (give ``price=`` to test dollar figures)."""


@register_builtin
class ScriptedLanguageModel(LanguageModel):
    """A LanguageModel that answers from a script and records every request.

    Args:
        responses: answers in call order (cycled); a dict is sent as JSON, a
            string as is, an exception instance is raised.
        respond: ``f(request) -> answer``, used instead of ``responses``.
        fail_on: ``f(call_index) -> bool``; True makes that call fail.
        delay_s: simulated latency per call.
        stream_delay_s: simulated time between the pieces of a streamed answer.
        native_tools: answer like a server that calls tools natively: a response
            ``{"content": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}`` to a
            request with ``tools`` comes back as OpenAI ``tool_calls``. Off (the default),
            it is an engine without native tool calls, as the embedded one.
        price: dollars per million tokens (default $0); its usage counts a word as a token.
    """

    def __init__(self, responses: list[Any] | None = None, respond: Responder | None = None,
                 fail_on: Callable[[int], bool] | None = None, model: str = "scripted/test",
                 concurrency: int = 8, delay_s: float = 0.0, native_tools: bool = False, stream_delay_s: float = 0.0,
                 **kwargs: Any) -> None:
        kwargs.setdefault("cache", False)
        kwargs.setdefault("price", SCRIPTED_PRICE)
        super().__init__(model=model, concurrency=concurrency, **kwargs)
        self.api_base = "scripted://"  # no server: set after the constructor, which checks server URLs
        self.responses = responses
        self._scripted = ScriptedEngine(responses, respond, fail_on, concurrency, delay_s, native_tools,
                                         stream_delay_s)
        self._engine = self._scripted

    @property
    def requests(self) -> list[LMRequest]:
        return self._scripted.requests

    @property
    def streams(self) -> StreamCounts:
        return self._scripted.streams

    def get_config(self) -> dict[str, Any]:
        config = {key: value for key, value in super().get_config().items() if key not in ("api_base",)}
        if self.price_override == SCRIPTED_PRICE:
            config.pop("price", None)
        serializable = all(isinstance(item, (dict, str)) for item in self.responses or [])
        return {**config, "responses": self.responses if serializable else None,
                **({"native_tools": True} if self._scripted.native_tools else {})}


@register_builtin
class HashEmbeddingModel(EmbeddingModel):
    """Deterministic bag-of-words vectors: similar texts get similar vectors, no engine needed."""

    def __init__(self, model: str = "local/multilingual-e5-small", dimensions: int = 64, **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)
        self.dimensions = dimensions
        self.calls = 0

    async def _embed(self, texts: list[str]) -> Any:
        self.calls += 1
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
            if not vectors[row].any():
                vectors[row, 0] = 1.0
        return vectors

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "dimensions": self.dimensions}


QA_GENERATOR = """[program.generator]
name = "answerer"
inputs = { question = "A question" }
outputs = { answer = "The answer" }"""
"""A config's program: one declared Generator, question -> answer."""


def qa_run_config(train: str | Path, *, program: str = QA_GENERATOR, name: str = "test-run", job: str = "", model: str = "",
                  optimizer: str = 'name = "randomfewshot"\nparams = { nb_max_examples = 2 }',
                  training: str = "epochs = 2") -> str:
    """A ``promptgym train`` config (TOML text): question -> answer over a JSONL file of
    ``{"prompt": ..., "label": ...}`` rows, a quarter held out, scored by exact match.

    ``job`` adds lines to ``[job]``; ``model`` and ``program`` are tables with
    their headers, ``optimizer`` and ``training`` the bodies of theirs.

    >>> import tomllib
    >>> config = tomllib.loads(qa_run_config("train.jsonl"))
    >>> config["program"]["generator"]["name"], config["data"]["validation_split"]
    ('answerer', 0.25)
    """
    return f"""
[job]
name = "{name}"
{job}
{model}
{program}

[data]
train = "{train}"
x_fields = {{ question = "prompt" }}
y_fields = {{ answer = "label" }}
validation_split = 0.25

[reward]
name = "exactmatch"

[optimizer]
{optimizer}

[training]
{training}
"""
