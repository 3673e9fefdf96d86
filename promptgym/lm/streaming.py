"""``StreamingIterator``: an answer handed over piece by piece (``LanguageModel(...)(messages, streaming=True)``).

    async for chunk in await lm(messages, streaming=True):
        print(chunk.get("content", ""), end="")

Each chunk is a dict with ``content`` (and ``reasoning_content`` for the
model's reasoning, when the server streams it). A backend that cannot
stream (the embedded engine) hands the whole answer over as one chunk.
"""

from __future__ import annotations

from typing import Any, AsyncIterator


class StreamingIterator:
    """Async iterator over an answer's chunks; ``await stream.aconsume()`` collects the rest."""

    def __init__(self, chunks: AsyncIterator[Any]) -> None:
        self._chunks = chunks
        self.content = ""
        self.reasoning_content = ""

    def __aiter__(self) -> "StreamingIterator":
        return self

    async def __anext__(self) -> dict[str, Any]:
        chunk = await self._chunks.__anext__()
        out: dict[str, Any] = {}
        if chunk.reasoning:
            self.reasoning_content += chunk.reasoning
            out["reasoning_content"] = chunk.reasoning
        if chunk.content or not chunk.reasoning:
            self.content += chunk.content
            out["content"] = chunk.content
        return out

    async def aconsume(self) -> dict[str, Any]:
        """Read to the end; the whole answer as an assistant message's JSON."""
        async for _ in self:
            pass
        return {"role": "assistant", "content": self.content, "reasoning_content": self.reasoning_content or None}
