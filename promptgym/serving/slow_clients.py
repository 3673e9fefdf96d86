"""A read timeout for ``serve``'s HTTP connections, so a slow client can't hold one for as long as it likes.

uvicorn's ``timeout_keep_alive`` closes a connection idle *between* requests, but nothing bounds
the time a client takes to *send* one: a client that writes a header line a second (slowloris)
holds its connection, and its slot under the connection cap, indefinitely. This protocol is
uvicorn's h11 protocol with one timer more: from a connection's start, or from the first byte
of each next request on it, the client has ``seconds`` to send the whole request (headers and
body). Past that, a request whose headers are not complete gets ``408 Request Timeout`` and the
connection is closed; one whose body is still arriving has its connection closed (the program
sees a disconnect, nothing runs on half a body).

It also bounds the request head: h11's ``max_incomplete_event_size`` only counts bytes while
the head is incomplete, so 100 KB of headers that arrive in one read pass it. Here the bytes up
to the blank line that ends the head are counted however they arrive; past
``max_header_bytes`` the answer is ``431 Request Header Fields Too Large`` and the connection
is closed, before the program sees anything.

    config = uvicorn.Config(app, http=read_timeout_protocol(10.0), limit_concurrency=512)
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("promptgym.serve")


END_OF_HEAD = b"\r\n\r\n"


def read_timeout_protocol(seconds: float, max_header_bytes: int = 16 * 1024) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with ``seconds`` for a client to send each whole request, heads of at most
    ``max_header_bytes``."""
    if not seconds > 0:
        raise ValueError(f"the read timeout must be > 0 seconds, got {seconds!r}")

    class ReadTimeoutH11Protocol(H11Protocol):
        read_timeout = float(seconds)
        head_limit = int(max_header_bytes)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._read_timer: asyncio.TimerHandle | None = None
            self._head_seen = 0     # bytes of the current request head so far
            self._head_tail = b""   # its last 3 bytes: an end-of-head marker may be split across reads

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first byte of the next request on a kept-alive connection
            if self.conn.their_state is h11.IDLE and self._head_too_large(data):
                logger.warning("%s sent request headers larger than %d bytes: 431, connection closed",
                               "%s:%d" % self.client if self.client else "a client", self.head_limit)
                self._send_raw(431, "Request Header Fields Too Large",
                               f"request headers are limited to {self.head_limit} bytes")
                self.transport.close()
                return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY \
                    and self.conn.their_state is not h11.SEND_RESPONSE:
                self._disarm()  # DONE, MUST_CLOSE, CLOSED, ERROR: nothing more to wait for

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(self.read_timeout, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _read_timed_out(self) -> None:
            self._read_timer = None
            if self.transport.is_closing() or self.conn.their_state is h11.DONE:
                return
            client = "%s:%d" % self.client if self.client else "a client"
            if self.cycle is None or self.cycle.response_complete:  # headers not complete: nothing runs yet
                logger.warning("%s sent no complete request headers within %g s: 408, connection closed", client,
                               self.read_timeout)
                self._send_408()
            else:
                logger.warning("%s did not send the request body within %g s: connection closed", client,
                               self.read_timeout)
            self.transport.close()

        def _head_too_large(self, data: bytes) -> bool:
            window = self._head_tail + data
            end = window.find(END_OF_HEAD)
            if end >= 0:  # the head is complete: its size, then the next request starts counting afresh
                size = self._head_seen - len(self._head_tail) + end + len(END_OF_HEAD)
                self._head_seen, self._head_tail = 0, b""
                return size > self.head_limit
            self._head_seen += len(data)
            self._head_tail = window[-(len(END_OF_HEAD) - 1):]
            return self._head_seen > self.head_limit

        def _send_408(self) -> None:
            self._send_raw(408, "Request Timeout", f"the request did not arrive within {self.read_timeout:g} s")

        def _send_raw(self, status: int, reason: str, text: str) -> None:
            body = (text + "\n").encode()
            response = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n").encode() + body
            self.transport.write(response)  # raw: h11's state machine may be mid-request, where it sends nothing

    return ReadTimeoutH11Protocol
