"""Bounded concurrency: at most ``concurrency`` requests run, ``queue`` more wait, the rest get 429.

    gate = Admission(concurrency=8, queue=64)
    async with gate.slot():        # raises Busy at once when 8 run and 64 wait
        ...                        # runs with one of the 8 slots

    release = await gate.hold()    # the same slot, given back by release() (a streamed answer's end)

A client told "busy" can retry later (``Retry-After``); one accepted is never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Callable


class Busy(Exception):
    """Every slot is taken and the queue is full."""


class Admission:
    """Counts requests in flight and waiting; hands out running slots in arrival order."""

    def __init__(self, concurrency: int, queue: int) -> None:
        if concurrency < 1 or queue < 0:
            raise ValueError(f"concurrency must be >= 1 and queue >= 0, got {concurrency} and {queue}")
        self.concurrency = concurrency
        self.queue = queue
        self.admitted = 0      # running + waiting
        self.running = 0
        self._slots: asyncio.Semaphore | None = None  # made in the server's loop, on first use

    @property
    def waiting(self) -> int:
        return self.admitted - self.running

    async def hold(self) -> Callable[[], None]:
        """Wait for a slot (``Busy`` at once when the queue is full); the function that gives it back.

        The release function may be called any number of times: only the first gives the slot back,
        so every way a streamed answer can end may call it.
        """
        if self.admitted >= self.concurrency + self.queue:
            raise Busy(f"the server is busy: {self.running} requests running and {self.waiting} waiting "
                       f"(limits {self.concurrency} and {self.queue}); retry later")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        slots = self._slots
        self.admitted += 1
        try:
            await slots.acquire()
        except BaseException:
            self.admitted -= 1
            raise
        self.running += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.running -= 1
                self.admitted -= 1
                slots.release()

        return release

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        release = await self.hold()
        try:
            yield
        finally:
            release()
