"""Chat completions streamed as the model writes them: OpenAI's server-sent events.

A streamed answer is ``chat.completion.chunk`` events: the assistant's role first, then one
event per piece of content (a program's: its last output field, from ``program.stream``; a
model's: its text, reasoning as ``reasoning_content``), an event with ``finish_reason``,
a usage event (``choices: []``) when ``stream_options.include_usage`` is set, then
``data: [DONE]``. The request keeps its admission slot until the answer ends, however it
ends: read to the end, failed, or a client that disconnected, which also stops the
generation at once (the model's stream is closed, and the embedded engine stops before its
next token).

    stream = AnswerStream(base, pieces, release, finish)
    first = await stream.start()        # model errors before the first piece become HTTP errors
    return SlotStreamingResponse(stream)
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from promptgym.lm.errors import LMError
from promptgym.lm.usage import Usage

logger = logging.getLogger("promptgym.serve")

Delta = dict[str, str]
DISCONNECTED = "the client left before the end of the answer"


def sse(payload: Any) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def usage_json(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens}


@dataclass
class StreamEnd:
    """How a streamed answer ended: why it stopped and what it used."""

    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)


@dataclass
class AnswerStream:
    """One streamed answer: its pieces as events, and the clean-up every way of ending runs once.

    ``pieces`` yields deltas (``{"content": ...}`` or ``{"reasoning_content": ...}``);
    ``finish()`` is called once they are read to the end and says how the answer ended;
    ``done(error)`` runs once, however the stream ends (``error`` None when read to the end,
    :data:`DISCONNECTED` when the client left), after ``pieces`` is closed and before the slot
    is released.
    """

    base: dict[str, Any]
    pieces: AsyncIterator[Delta]
    release: Callable[[], None]
    finish: Callable[[], StreamEnd]
    done: Callable[[str | None], None]
    include_usage: bool = False
    first: Delta | None = None
    _closed: bool = False
    error: str | None = DISCONNECTED
    """Why the answer did not end normally (None once it did); read by ``done``."""

    async def start(self) -> None:
        """Read the first piece (its errors are the caller's to turn into an HTTP answer)."""
        self.first = await anext(self.pieces, None)

    def _chunk(self, delta: Delta, finish_reason: str | None = None) -> str:
        return sse({**self.base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                              "finish_reason": finish_reason}]})

    async def events(self) -> AsyncIterator[str]:
        try:
            role = self._chunk({"role": "assistant", "content": ""})
            # One write for both: the client wakes once for the first piece, not again after the role.
            yield role + self._chunk(self.first) if self.first else role
            async for delta in self.pieces:
                yield self._chunk(delta)
            end = self.finish()
            last = {**self.base, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                              "finish_reason": end.finish_reason}]}
            if self.include_usage:
                yield sse(last)
                yield sse({**self.base, "choices": [], "usage": usage_json(end.usage)})
            else:  # OpenAI sends usage only when asked; it rides on the last chunk here, for clients that read it
                yield sse({**last, "usage": usage_json(end.usage)})
            yield "data: [DONE]\n\n"
            self.error = None
        except LMError as error:  # the status line is sent already: the error goes in the stream, as OpenAI's does
            self.error = f"the language model failed: {error}"
            yield sse({"error": {"message": self.error, "type": "model_error", "param": None,
                                 "code": "model_error"}})
        except Exception as error:  # noqa: BLE001 - one failing answer must not show a traceback or stop the server
            self.error = f"{type(error).__name__}: {error}"
            logger.warning("streamed answer failed: %s", self.error)
            yield sse({"error": {"message": f"the answer failed: {self.error}", "type": "server_error",
                                 "param": None, "code": "internal"}})
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop the generation, report how it ended, give the slot back (again: nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            closing = getattr(self.pieces, "aclose", None)
            if closing is not None:
                await closing()
        finally:
            try:
                self.done(self.error)
            finally:
                self.release()


class SlotStreamingResponse(StreamingResponse):
    """A StreamingResponse of an :class:`AnswerStream` that closes it however the response ends.

    Starlette cancels the sending task when the client disconnects; a body iterator not yet
    started would then never run its own clean-up, so this response runs it too.
    """

    def __init__(self, stream: AnswerStream, headers: dict[str, str] | None = None) -> None:
        super().__init__(stream.events(), media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", **(headers or {})})
        self.stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]
            await self.stream.close()
