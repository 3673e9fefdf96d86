"""Embedding models for the Ray ingestion tests: HashEmbeddingModel's vectors, and a way to kill its worker
(``DyingHashEmbedder``) or to see whether a cancelled call ran to its end (``SlowHashEmbedder``).

``DyingHashEmbedder`` kills its own process the first time it embeds a text containing ``die_word`` (a marker
file makes "the first time" hold across processes), or every time it runs in a process other than ``driver_pid``.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import promptgym as pg
from promptgym.testing import HashEmbeddingModel


@pg.register_synalinks_serializable()
class DyingHashEmbedder(HashEmbeddingModel):
    def __init__(self, die_word: str | None = None, marker: str | None = None, driver_pid: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.die_word, self.marker, self.driver_pid = die_word, marker, driver_pid

    async def _embed(self, texts: list[str]) -> Any:
        if self.driver_pid is not None and os.getpid() != self.driver_pid:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.die_word and self.marker and not Path(self.marker).exists() and any(self.die_word in t for t in texts):
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return await super()._embed(texts)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "die_word": self.die_word, "marker": self.marker, "driver_pid": self.driver_pid}


@pg.register_synalinks_serializable()
class SlowHashEmbedder(HashEmbeddingModel):
    """Touches ``started``, waits ``delay`` seconds, then touches ``finished``: a call cancelled on its worker
    never touches ``finished``."""

    def __init__(self, started: str = "", finished: str = "", delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started, self.finished, self.delay = started, finished, delay

    async def _embed(self, texts: list[str]) -> Any:
        Path(self.started).touch()
        await asyncio.sleep(self.delay)
        Path(self.finished).touch()
        return await super()._embed(texts)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "started": self.started, "finished": self.finished, "delay": self.delay}
