"""An ASGI app (FastAPI) served by uvicorn on 127.0.0.1 inside the event loop that is already running.

promptgym has one server stack, FastAPI on uvicorn: ``promptgym serve`` runs it as the process's
main loop; this runs it beside other work (an RL run's policy server, the export check's model
server) and leaves the process's signal handlers alone, which uvicorn's own ``serve`` would take::

    async with LocalServer(app) as base_url:      # "http://127.0.0.1:<free port>"
        ...                                       # requests to base_url
"""

from __future__ import annotations

import asyncio
import socket
from types import TracebackType
from typing import Any

GRACEFUL_S = 2.0
"""How long a stop waits for requests still in flight before it closes their connections."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a server that takes a port number, not a socket)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one)."""
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without it
    # every response waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


class LocalServer:
    """``app`` on ``host:port`` until :meth:`stop` (or the end of an ``async with``)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, graceful_s: float = GRACEFUL_S) -> None:
        self.app, self.host, self.port, self.graceful_s = app, host, port, graceful_s
        self.url = ""
        self._server: Any = None
        self._socket: socket.socket | None = None
        self._ticks: asyncio.Task[None] | None = None

    async def start(self) -> str:
        """Listen; returns the base URL (``http://host:port``)."""
        import uvicorn  # deferred: the server stack loads only when something is served

        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="off", server_header=False,
                                timeout_graceful_shutdown=self.graceful_s)
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        self._socket = bound_socket(self.host, self.port)
        await server.startup(sockets=[self._socket])
        self._server = server
        self._ticks = asyncio.create_task(server.main_loop())  # the Date header, and should_exit
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self._socket.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        """Stop listening; requests in flight get ``graceful_s`` seconds to finish."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.should_exit = True
        if self._ticks is not None:
            await asyncio.gather(self._ticks, return_exceptions=True)
        await server.shutdown(sockets=[self._socket])
        if self._socket is not None:
            self._socket.close()

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.stop()
