"""One resource per running event loop, closed when that loop shuts down.

HTTP clients and semaphores belong to the event loop that first used them,
and a user may call ``asyncio.run`` many times. ``asyncio.run`` finalises the
loop's live async generators before closing it, so a generator parked on the
resource closes it in the right loop::

    clients = LoopScoped(HttpClient, lambda client: client.close())
    client = await clients.get()
    slots = loop_semaphore(8)                # an asyncio.Semaphore(8) per loop
    async with await slots.get(): ...
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")

_closers_by_loop: dict[int, list[AsyncIterator[Any]]] = {}
"""Every loop's closers, held here (not only by their owner) so that a resource whose owner
is gone, a model dropped mid-run, is still closed when its loop ends rather than warning
"Unclosed connector"."""


async def _closing_at_loop_end(resource: T, close: Callable[[T], Awaitable[Any]], loop_id: int) -> AsyncIterator[T]:
    try:
        yield resource
    finally:
        _closers_by_loop.pop(loop_id, None)  # only the loop's shutdown closes these: it holds them all meanwhile
        await close(resource)


class LoopScoped(Generic[T]):
    """``await get()`` returns this loop's resource, creating it (and its closer) on first use."""

    def __init__(self, factory: Callable[[], T], close: Callable[[T], Awaitable[Any]]) -> None:
        self.factory = factory
        self.close = close
        self._by_loop: dict[int, T] = {}

    async def get(self) -> T:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._by_loop:
            resource = self.factory()
            closer = _closing_at_loop_end(resource, self.close, loop_id)
            await closer.__anext__()  # registers the generator with this loop's shutdown hook
            _closers_by_loop.setdefault(loop_id, []).append(closer)
            self._by_loop[loop_id] = resource
        return self._by_loop[loop_id]


async def _nothing_to_close(_: Any) -> None:
    return None


def loop_semaphore(size: int | Callable[[], int]) -> LoopScoped[asyncio.Semaphore]:
    """An ``asyncio.Semaphore(size)`` per event loop (a semaphore can't cross loops); ``size`` may be
    a function, read when a loop first asks."""
    return LoopScoped(lambda: asyncio.Semaphore(size() if callable(size) else size), _nothing_to_close)
