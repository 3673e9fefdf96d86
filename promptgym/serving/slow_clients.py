"""A read timeout for ``serve``'s HTTP connections, so a slow client can't hold one for as long as it likes.

uvicorn's ``timeout_keep_alive`` closes a connection idle *between* requests, but nothing bounds
the time a client takes to *send* one: a client that writes a header line a second (slowloris)
holds its connection, and its slot under the connection cap, indefinitely. This protocol is
uvicorn's h11 protocol with one timer more: from a connection's start, or from the first byte
of each next request on it, the client has ``seconds`` to send the whole request (headers and
body). Past that, a request whose headers are not complete gets ``408 Request Timeout`` and the
connection is closed; one whose body is still arriving has its connection closed (the program
sees a disconnect, nothing runs on half a body).

    config = uvicorn.Config(app, http=read_timeout_protocol(10.0), limit_concurrency=512)
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("promptgym.serve")


def read_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with ``seconds`` for a client to send each whole request."""
    if not seconds > 0:
        raise ValueError(f"the read timeout must be > 0 seconds, got {seconds!r}")

    class ReadTimeoutH11Protocol(H11Protocol):
        read_timeout = float(seconds)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._read_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first byte of the next request on a kept-alive connection
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

        def _send_408(self) -> None:
            body = f"the request did not arrive within {self.read_timeout:g} s\n".encode()
            response = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                        b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.transport.write(response)  # raw: h11's state machine may be mid-request, where it sends nothing

    return ReadTimeoutH11Protocol
