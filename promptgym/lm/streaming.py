"""``StreamingIterator``: an answer handed over piece by piece (``LanguageModel(...)(messages, streaming=True)``).

    async for chunk in await lm(messages, streaming=True):
        print(chunk.get("content", ""), end="")

Each chunk is a dict with ``content`` (and ``reasoning_content`` for the
model's reasoning, when the server streams it). An engine that cannot
stream hands the whole answer over as one chunk. Once read to the end,
``finish_reason``, ``prompt_tokens`` and ``completion_tokens`` say how it
ended; ``aclose()`` (or leaving ``async with``) stops the generation.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable

from promptgym.lm.engine import LMChunk


class StreamingIterator:
    """Async iterator over an answer's chunks; ``await stream.aconsume()`` collects the rest."""

    def __init__(self, chunks: AsyncIterator[LMChunk]) -> None:
        self._chunks = chunks
        self.content = ""
        self.reasoning_content = ""
        self.finish_reason: str | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def __aiter__(self) -> "StreamingIterator":
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            chunk = await self._chunks.__anext__()
            if chunk.finish_reason is not None or chunk.prompt_tokens or chunk.completion_tokens:
                self.finish_reason = chunk.finish_reason or self.finish_reason
                self.prompt_tokens += chunk.prompt_tokens
                self.completion_tokens += chunk.completion_tokens
                if not chunk.content and not chunk.reasoning:
                    continue  # the end's bookkeeping, nothing to show
            out: dict[str, Any] = {}
            if chunk.reasoning:
                self.reasoning_content += chunk.reasoning
                out["reasoning_content"] = chunk.reasoning
            if chunk.content or not chunk.reasoning:
                self.content += chunk.content
                out["content"] = chunk.content
            return out

    async def aclose(self) -> None:
        """Stop reading: the engine stops generating and frees its slot."""
        closing = getattr(self._chunks, "aclose", None)
        if closing is not None:
            await closing()

    async def __aenter__(self) -> "StreamingIterator":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aconsume(self) -> dict[str, Any]:
        """Read to the end; the whole answer as an assistant message's JSON."""
        async for _ in self:
            pass
        return {"role": "assistant", "content": self.content, "reasoning_content": self.reasoning_content or None}


CHARS_PER_TOKEN = 4.0
"""The estimate of a text's tokens when nobody counted them: OpenAI's rule of thumb for English (about four
characters a token), rounded up. Used only for a stream whose server sent no usage, or one left half-way."""


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by :data:`CHARS_PER_TOKEN` (at least one for any text).

    >>> estimate_tokens("Hello, world!"), estimate_tokens("")
    (4, 0)
    """
    return -int(-len(text) // CHARS_PER_TOKEN) if text else 0


def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """A prompt's tokens by :func:`estimate_tokens`, plus 4 a message for the chat template's markers.

    >>> estimate_prompt_tokens([{"role": "user", "content": "Hello, world!"}])
    8
    """
    return sum(estimate_tokens(str(message.get("content") or "")) + 4 for message in messages)


class StreamMeter:
    """What a streamed call has cost so far, chunk by chunk, in tokens.

    While it streams, the completion's tokens are estimated from its length (:func:`estimate_tokens`: a
    running figure, cheap at every chunk); at the end the server's usage chunk, when it sent one, replaces
    the estimate, else ``count`` (the engine's tokenizer, when it has one) recounts the whole text::

        meter = StreamMeter(prompt_tokens=12)
        meter.add("Hello, world!")
        meter.completion_tokens      # 4
        meter.finish(prompt_tokens=12, completion_tokens=3)
        meter.exact                  # True: the server said
    """

    def __init__(self, prompt_tokens: int, count: "Callable[[str], int] | None" = None) -> None:
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = 0
        self.exact = False
        self._count = count
        self._chars = 0
        self._text: list[str] = []
        self.largest_chunk = 1
        """The most tokens one chunk brought (a capped stream keeps room for two more such chunks)."""

    def add(self, text: str) -> None:
        """A chunk's text: the completion's running estimate grows."""
        if text:
            self._text.append(text)
            self._chars += len(text)
            self.largest_chunk = max(self.largest_chunk, estimate_tokens(text))
            self.completion_tokens = -int(-self._chars // CHARS_PER_TOKEN)

    def finish(self, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """The end (or the reader left): the server's counts when it gave any, else the tokenizer's recount."""
        if prompt_tokens or completion_tokens:
            self.prompt_tokens, self.completion_tokens, self.exact = prompt_tokens, completion_tokens, True
        elif self._count is not None and self._text:
            self.completion_tokens = self._count("".join(self._text))
