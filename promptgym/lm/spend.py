"""A dollar cap on the model calls made inside a block: reserve before each call, settle after.

Every call that is about to reach a model reserves an upper estimate of its
price (its prompt, and ``max_tokens`` of answer); when the reservation
would take spent + reserved past the cap, the call waits for the calls in
flight to settle (their real price is usually below the estimate) and, if
it still does not fit, raises :class:`SpendCapReached`. So concurrent calls
never cross the cap together::

    cap = SpendCap(usd=2.0)
    with cap.active():
        await program.fit(...)       # fit(max_usd=2.0) does this for you
    cap.spent_usd <= 2.0
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from typing import Iterator

_active: contextvars.ContextVar[tuple["SpendCap", ...]] = contextvars.ContextVar("promptgym_spend_caps", default=())


class SpendCapReached(BaseException):
    """A call would cross the dollar cap.

    A ``BaseException`` (like ``asyncio.CancelledError``), so the handlers that
    turn one example's failure into a 0 score let it through: a capped run
    stops, it does not score its unpaid examples as wrong.
    """

    def __init__(self, message: str, reason: str = "cap") -> None:
        super().__init__(message)
        self.reason = reason  # "cap": the money is spent; "unpriced": a model with no price can't be capped


class SpendCap:
    """At most ``usd`` dollars, ``spent_usd`` of which were spent before (a resumed run's)."""

    def __init__(self, usd: float, spent_usd: float = 0.0) -> None:
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or usd <= 0:
            raise ValueError(f"max_usd must be a number of dollars > 0, got {usd!r}")
        self.limit_usd = float(usd)
        self.spent_usd = float(spent_usd)
        self.reserved_usd = 0.0
        self.in_flight = 0
        self.peak_in_flight = 0
        """The most calls that held a reservation at once."""
        self.peak_committed_usd = self.spent_usd
        """The most that spent + reserved ever reached (never above the limit)."""
        self.reached = self.spent_usd >= self.limit_usd
        self._waiters: list[asyncio.Future[None]] = []
        self._lock = threading.Lock()

    @property
    def remaining_usd(self) -> float:
        return self.limit_usd - self.spent_usd

    async def reserve(self, usd: float, model: str) -> None:
        """Hold ``usd`` for a call of ``model`` about to start, or raise :class:`SpendCapReached`."""
        while True:
            with self._lock:
                if not self.reached and self.spent_usd + self.reserved_usd + usd <= self.limit_usd:
                    self.reserved_usd += usd
                    self.in_flight += 1
                    self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                    self.peak_committed_usd = max(self.peak_committed_usd, self.spent_usd + self.reserved_usd)
                    return
                if self.reached or not self.in_flight:  # nothing will settle: this call can never fit
                    self.reached = True
                    self._wake()
                    raise SpendCapReached(
                        f"max_usd ${self.limit_usd:.6f}: ${self.spent_usd:.6f} spent, and the next call of {model} "
                        f"(up to ${usd:.6f}) would cross it")
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
            await waiter  # a call in flight settles: its real price is usually below its estimate

    def try_extend(self, usd: float) -> bool:
        """Add ``usd`` to a call's reservation (a stream that runs long) if it fits now; never waits."""
        with self._lock:
            if self.reached or self.spent_usd + self.reserved_usd + usd > self.limit_usd:
                return False
            self.reserved_usd += usd
            self.peak_committed_usd = max(self.peak_committed_usd, self.spent_usd + self.reserved_usd)
            return True

    def release(self, usd: float) -> None:
        """Give back part of a reservation, the call still in flight (an extension another cap refused)."""
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - usd)
            self._wake()

    def settle(self, reserved_usd: float, actual_usd: float) -> None:
        """Replace a reservation by what the call cost (0 for one that failed before an answer).

        Synchronous, so a cancelled call still gives its reservation back.
        """
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)
            self.in_flight = max(0, self.in_flight - 1)
            self.spent_usd += actual_usd
            self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.get_loop().call_soon_threadsafe(_resolve, waiter)
        self._waiters.clear()

    @contextlib.contextmanager
    def active(self) -> Iterator["SpendCap"]:
        """Cap the calls made in the block (tasks it starts included)."""
        token = _active.set((*_active.get(), self))
        try:
            yield self
        finally:
            _active.reset(token)


def active_caps() -> tuple[SpendCap, ...]:
    """The caps open here (the innermost last)."""
    return _active.get()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # it may have been cancelled meanwhile
        waiter.set_result(None)
