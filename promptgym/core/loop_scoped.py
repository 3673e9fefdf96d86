"""One resource per running event loop, closed when that loop shuts down.

HTTP clients belong to the event loop that first used them, and a user may
call ``asyncio.run`` many times. ``asyncio.run`` finalises the loop's live
async generators before closing it, so a generator parked on the resource
closes it in the right loop::

    sessions = LoopScoped(aiohttp.ClientSession, lambda session: session.close())
    session = await sessions.get()
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")


async def _closing_at_loop_end(resource: T, close: Callable[[T], Awaitable[Any]]) -> AsyncIterator[T]:
    try:
        yield resource
    finally:
        await close(resource)


class LoopScoped(Generic[T]):
    """``await get()`` returns this loop's resource, creating it (and its closer) on first use."""

    def __init__(self, factory: Callable[[], T], close: Callable[[T], Awaitable[Any]]) -> None:
        self.factory = factory
        self.close = close
        self._by_loop: dict[int, tuple[T, AsyncIterator[T]]] = {}

    async def get(self) -> T:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._by_loop:
            resource = self.factory()
            keeper = _closing_at_loop_end(resource, self.close)
            await keeper.__anext__()  # registers the generator with this loop's shutdown hook
            self._by_loop[loop_id] = (resource, keeper)
        return self._by_loop[loop_id][0]
