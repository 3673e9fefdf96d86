"""Threads for synchronous tools: daemon threads, a bounded number, so a hung tool costs a slot, not the exit.

``asyncio.to_thread`` runs on the loop's default executor, whose threads ``asyncio.run`` and
the interpreter join at exit: a plain ``def`` tool hung past its timeout kept the script alive
until it returned, and in ``serve`` kept a worker thread for good. A thread can't be killed,
so here each call runs on its own daemon thread (the interpreter does not wait for it at exit)
and holds one of ``limit`` slots until the function really returns:

- a call waits for a free slot (within its own timeout), so a burst of calls queues as it
  did on the default executor;
- when every slot is held by calls already past their timeout, a new call answers at once
  with :class:`ToolThreadsExhausted` (the tool turns it into ``{"error": ...}``), naming the
  tools that hang, instead of starting yet another thread.

    >>> threads = ToolThreads(limit=4)
    >>> import asyncio
    >>> asyncio.run(threads.run(lambda: 2 + 2, timeout=1.0, name="add"))
    4
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
from collections import Counter
from typing import Any, Callable

DEFAULT_LIMIT = int(os.environ.get("PROMPTGYM_TOOL_THREADS", "32"))
_POLL_S = 0.01  # slots are shared by every event loop of the process (serve workers, threads), so a waiter polls


class ToolThreadsExhausted(RuntimeError):
    """Every tool thread is held by a call that ran past its timeout."""


class ToolThreads:
    """At most ``limit`` synchronous tool calls running at once, each on a daemon thread."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"ToolThreads: limit must be >= 1, got {limit}")
        self.limit = limit
        self.running = 0
        self.stuck: Counter[str] = Counter()  # tool name -> calls past their timeout whose thread still runs
        self._lock = threading.Lock()

    def _take(self, name: str) -> bool:
        with self._lock:
            if self.running < self.limit:
                self.running += 1
                return True
            if sum(self.stuck.values()) >= self.limit:
                hung = ", ".join(f"{tool} ({count})" for tool, count in self.stuck.most_common())
                raise ToolThreadsExhausted(
                    f"{name} was not started: all {self.limit} tool threads are held by calls that ran past their "
                    f"timeout and have not returned ({hung}); fix or remove the hanging tool "
                    "(PROMPTGYM_TOOL_THREADS sets the limit)")
            return False

    def _release(self, name: str, state: dict[str, bool]) -> None:
        with self._lock:  # with the timeout's marking below, under one lock: a slot is never counted stuck twice
            state["finished"] = True
            self.running -= 1
            if state["stuck"]:
                self.stuck[name] -= 1
                if self.stuck[name] <= 0:
                    del self.stuck[name]

    async def run(self, func: Callable[..., Any], *, timeout: float | None, name: str, **kwargs: Any) -> Any:
        """``func(**kwargs)`` on a daemon thread; raises ``asyncio.TimeoutError`` past ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._take(name):
            if deadline is not None and time.monotonic() >= deadline:
                raise asyncio.TimeoutError
            await asyncio.sleep(_POLL_S)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()
        state = {"stuck": False, "finished": False}

        def deliver(setter: Callable[[Any], None], value: Any) -> None:
            if not future.done():
                setter(value)

        def work() -> None:
            try:
                outcome: tuple[Callable[[Any], None], Any] = (future.set_result, context.run(func, **kwargs))
            except BaseException as error:  # noqa: BLE001 - handed to the caller, which makes it a tool error
                if not isinstance(error, Exception):  # sys.exit() in a tool must not end the caller's program
                    error = RuntimeError(f"the tool raised {type(error).__name__}({error})")
                outcome = (future.set_exception, error)
            self._release(name, state)
            try:
                loop.call_soon_threadsafe(deliver, *outcome)
            except RuntimeError:  # the loop closed while the call ran past its timeout: nobody waits for it
                pass

        threading.Thread(target=work, name=f"promptgym-tool-{name}", daemon=True).start()
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(asyncio.shield(future), remaining)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            with self._lock:
                if not state["finished"] and not state["stuck"]:
                    state["stuck"] = True
                    self.stuck[name] += 1
            raise


SLOTS = ToolThreads()
"""The process's tool threads (tests swap in a smaller one)."""
