"""Retrying a request with exponential backoff, holding a concurrency slot only while it is in flight.

One try is a coroutine function: it returns the answer, raises :class:`Retry` for a
failure worth another try (a dropped connection, a 5xx, a 429), or raises anything
else to stop at once. Between tries the slot is free for other requests, so a
server that fails one request in three doesn't idle the others during backoffs::

    async def attempt():
        reply = await session.post(url, json=payload)
        if reply.status >= 500:
            raise Retry(f"HTTP {reply.status}")
        return reply

    reply = await retrying(attempt, RetryPolicy(retries=3, backoff_s=0.5), slot=semaphore)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")


class Retry(Exception):
    """Raised by a try that failed in a way another try may fix.

    ``rate_limited`` marks a 429 (so the final error can say so); ``wait_s``
    is the server's own hint (``Retry-After``), used when longer than the backoff.
    """

    def __init__(self, reason: str, *, rate_limited: bool = False, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rate_limited = rate_limited
        self.wait_s = wait_s

    @classmethod
    def of(cls, error: BaseException) -> "Retry":
        """A try that failed with ``error`` (a dropped connection...): its type, and its message if it has one.

        >>> Retry.of(ConnectionResetError("peer closed")).reason, Retry.of(TimeoutError()).reason
        ('ConnectionResetError: peer closed', 'TimeoutError')
        """
        return cls(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)


class RetriesExhausted(Exception):
    """Every try failed; ``last`` is the last try's :class:`Retry`."""

    def __init__(self, attempts: int, last: Retry) -> None:
        super().__init__(f"{attempts} attempts, last: {last.reason}")
        self.attempts = attempts
        self.last = last


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` tries after the first, waiting ``backoff_s``, then twice that, ... (at most ``max_wait_s``).

    >>> [RetryPolicy(backoff_s=0.5).wait_s(attempt) for attempt in (1, 2, 3)]
    [0.5, 1.0, 2.0]
    """

    retries: int = 3
    backoff_s: float = 0.5
    max_wait_s: float = 30.0

    def wait_s(self, attempt: int, hint: float | None = None) -> float:
        """The pause before try number ``attempt`` (1 = the first retry)."""
        return min(self.max_wait_s, max(self.backoff_s * 2 ** (attempt - 1), hint or 0.0))


async def retrying(attempt: Callable[[], Awaitable[T]], policy: RetryPolicy, slot: asyncio.Semaphore | None = None) -> T:
    """``await attempt()`` until it doesn't raise :class:`Retry`; each try holds ``slot``, the pauses don't."""
    last: Retry | None = None
    for number in range(policy.retries + 1):
        if last is not None:
            await asyncio.sleep(policy.wait_s(number, last.wait_s))
        try:
            if slot is None:
                return await attempt()
            async with slot:
                return await attempt()
        except Retry as retry:
            last = retry
    assert last is not None
    raise RetriesExhausted(policy.retries + 1, last)
