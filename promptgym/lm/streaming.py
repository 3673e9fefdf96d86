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

from typing import Any, AsyncIterator

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
