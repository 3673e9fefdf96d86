"""promptgym's one HTTP client: keep-alive HTTP/1.1 to any server, plain or TLS, whole answers or streamed.

Every outgoing call goes through it: model servers (``lm/openai_engine.py``), task apps and their
policies (``taskapp/``), the export check. It was chosen by measurement (docs/benchmarks.md,
"One HTTP client"): on the instant fake server a request costs 0.26 ms of CPU here, 0.40 ms through
aiohttp and 1.3 ms through httpx (5 ms at concurrency 32), and with aiohttp promptgym's time per call
in benchmark B rose from 0.15-0.18x DSPy's to 0.20-0.21x, past the 0.2x target. A request is written
in one ``write`` and the answer read with an asyncio stream: status line, headers, then a body of
``Content-Length`` bytes, ``chunked`` or up to the end of the connection. Connections are reused while
the server keeps them open; one the server closed while idle is replaced once, transparently.
What it does not do: redirects, proxies, compression, HTTP/2 (no model server or task app needs them)::

    client = HttpClient(timeout=120, headers={"Authorization": "Bearer sk-..."})
    reply = await client.request("POST", "https://api.openai.com/v1/chat/completions", json={...})
    reply.status, reply.headers["content-type"], reply.json()
    async with client.stream("POST", url, json={..., "stream": True}) as streamed:
        async for line in streamed.lines(): ...
    await client.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import json as jsonlib
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar
from urllib.parse import urlsplit

MAX_HEADER_LINES = 200
MAX_ROUTES = 256
"""URLs whose (pool, path) a client remembers: a model's few endpoints are parsed once, not per request."""
_READ_SIZE = 65536
_DEFAULT_PORTS = {"http": 80, "https": 443}

R = TypeVar("R")


class HttpError(Exception):
    """The connection failed or the server broke the protocol (worth another try)."""


class HttpStatusError(Exception):
    """The server answered with an error status (:meth:`RawReply.raise_for_status`)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class RawReply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    """Lower-cased names; a repeated header keeps its last value."""
    url: str = ""

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON (``ValueError`` when it is not)."""
        return jsonlib.loads(self.body)

    def raise_for_status(self) -> None:
        """:class:`HttpStatusError` naming the URL and the start of the body, for a status of 400 or more."""
        if self.status >= 400:
            raise HttpStatusError(f"{self.url} answered HTTP {self.status}: {self.text[:200]}", self.status)


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    def close(self) -> None:
        self.writer.close()


class StreamedReply:
    """An answer whose body is read as it arrives (:meth:`HttpClient.stream`); each read waits at most ``timeout``."""

    def __init__(self, status: int, headers: dict[str, str], url: str, body: _BodyReader, timeout: float) -> None:
        self.status, self.headers, self.url = status, headers, url
        self._body, self._timeout = body, timeout

    async def read(self) -> bytes:
        """The rest of the body."""
        parts = []
        while piece := await self._piece():
            parts.append(piece)
        return b"".join(parts)

    async def text(self) -> str:
        return (await self.read()).decode("utf-8", errors="replace")

    async def lines(self) -> AsyncIterator[bytes]:
        """The rest of the body, line by line (each with its ``\\n``; the last may lack it)."""
        pending = b""
        while piece := await self._piece():
            pending += piece
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line + b"\n"
        if pending:
            yield pending

    async def _piece(self) -> bytes:
        async with asyncio.timeout(self._timeout):
            return await self._body.read_some()

    def close(self) -> None:
        """Give the connection back when the body was read to its end, else drop it (a server then stops writing)."""
        self._body.finish()


class ConnectionPool:
    """Keep-alive connections to one ``host:port`` (for one event loop; callers bound the concurrency).

    ``ssl``: a TLS context for an ``https`` server (``ssl.create_default_context()`` checks its certificate).
    """

    def __init__(self, host: str, port: int, timeout: float, default_headers: dict[str, str] | None = None,
                 ssl: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.ssl = ssl
        named = f"[{host}]" if ":" in host else host
        default = _DEFAULT_PORTS["https" if ssl else "http"]
        self._host_header = named if port == default else f"{named}:{port}"
        fixed = {"User-Agent": "promptgym", **(default_headers or {})}
        self._fixed_headers = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._idle: list[_Connection] = []

    def _message(self, method: str, path: str, body: bytes | None, headers: dict[str, str] | None) -> bytes:
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self._host_header}\r\n{self._fixed_headers}"
                + "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
                + f"Content-Length: {len(body or b'')}\r\n\r\n").encode("latin-1")
        return head + (body or b"")

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None, timeout: float | None = None) -> RawReply:
        """One request; ``asyncio.TimeoutError`` after ``timeout`` seconds, :class:`HttpError` on a broken connection."""
        async with asyncio.timeout(timeout or self.timeout):  # not wait_for: that starts a task per request
            return await self._exchange(self._message(method, path, body, headers), method, whole=True)  # type: ignore[return-value]

    async def open(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                   timeout: float | None = None) -> StreamedReply:
        """The answer's status and headers, its body left to read (:class:`StreamedReply`; close it when done)."""
        async with asyncio.timeout(timeout or self.timeout):
            return await self._exchange(self._message(method, path, body, headers), method, whole=False)  # type: ignore[return-value]

    async def _exchange(self, message: bytes, method: str, whole: bool) -> RawReply | StreamedReply:
        connection = self._idle_connection() or await self._connect()
        try:
            try:
                return await self._send(connection, message, method, whole)
            except (ConnectionError, asyncio.IncompleteReadError, HttpError):
                if not connection.reused:
                    raise
                connection.close()  # the server closed it while it sat idle: one fresh try
                connection = await self._connect()
                return await self._send(connection, message, method, whole)
        except (OSError, asyncio.IncompleteReadError, HttpError) as error:
            connection.close()
            raise HttpError(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__) from None
        except BaseException:  # a timeout or a cancellation mid-answer: the connection's state is unknown
            connection.close()
            raise

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=2 ** 20, ssl=self.ssl,
                                                           server_hostname=self.host if self.ssl else None)
        except OSError as error:
            raise HttpError(f"cannot connect to {self.host}:{self.port}: {error}") from None
        return _Connection(reader, writer)

    async def _send(self, connection: _Connection, message: bytes, method: str,
                    whole: bool) -> RawReply | StreamedReply:
        connection.writer.write(message)
        status, headers, keep_alive = await _read_head(connection.reader)
        empty = method == "HEAD" or status in (204, 304)
        framed = empty or "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        reusable = keep_alive and framed  # an answer that ran to the end of the connection leaves nothing to reuse
        if not whole:
            return StreamedReply(status, headers, "", _BodyReader(self, connection, headers, empty, reusable),
                                 self.timeout)
        body = b"" if empty else await _read_body(connection.reader, headers)
        self._give_back(connection, reusable)
        return RawReply(status, body, headers)

    def _give_back(self, connection: _Connection, reusable: bool) -> None:
        if reusable:
            connection.reused = True
            self._idle.append(connection)
        else:
            connection.close()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


class _BodyReader:
    """A body read piece by piece: ``Content-Length`` bytes, ``chunked``, or up to the end of the connection."""

    def __init__(self, pool: ConnectionPool, connection: _Connection, headers: dict[str, str], empty: bool,
                 reusable: bool) -> None:
        self._pool, self._connection, self._reusable = pool, connection, reusable
        self._chunked = not empty and "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        if not empty and not self._chunked and length is not None and not length.isdigit():
            raise HttpError(f"bad Content-Length: {length!r}")
        self._left: int | None = 0 if empty else None if self._chunked or length is None else int(length)
        self._done = empty or self._left == 0

    async def read_some(self) -> bytes:
        """The next piece of the body; ``b""`` at its end."""
        if self._done:
            return b""
        reader = self._connection.reader
        try:
            if self._chunked:
                piece = await _read_chunk(reader)
            elif self._left is None:
                piece = await reader.read(_READ_SIZE)
            else:
                piece = await reader.read(min(self._left, _READ_SIZE))
                if not piece:
                    raise HttpError(f"the body ended {self._left} bytes short of its Content-Length")
                self._left -= len(piece)
        except (OSError, asyncio.IncompleteReadError) as error:
            self._reusable = False
            raise HttpError(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__) from None
        self._done = not piece or self._left == 0
        return piece

    def finish(self) -> None:
        if self._connection is None:
            return
        connection, self._connection = self._connection, None  # type: ignore[assignment]
        if self._done:
            self._pool._give_back(connection, self._reusable)
        else:
            connection.close()


class HttpClient:
    """Keep-alive connections to any number of servers (one :class:`ConnectionPool` per origin), for one event loop.

    ``headers`` go with every request; ``timeout`` bounds a whole request, or one read of a streamed body.

    >>> client = HttpClient(timeout=5)
    >>> client.pool_of("https://api.openai.com/v1/models")[1]
    '/v1/models'
    """

    def __init__(self, timeout: float = 60.0, headers: dict[str, str] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        self.headers = dict(headers or {})
        self._ssl_context = ssl_context
        self._pools: dict[tuple[str, str, int], ConnectionPool] = {}
        self._routes: dict[str, tuple[ConnectionPool, str]] = {}

    def pool_of(self, url: str) -> tuple[ConnectionPool, str]:
        """The pool for ``url``'s origin and the path (with its query) to ask it for."""
        route = self._routes.get(url)
        if route is None:
            if len(self._routes) >= MAX_ROUTES:  # URLs with ids in them (RL rollouts) must not grow it
                self._routes.clear()
            route = self._routes[url] = self._route(url)
        return route

    def _route(self, url: str) -> tuple[ConnectionPool, str]:
        parts = urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise HttpError(f"{url!r}: expected an http:// or https:// URL")
        if parts.username or parts.password:
            raise HttpError(f"{parts.scheme}://{parts.hostname}: credentials in the URL are not sent; "
                            "pass them as a header (an api_key)")
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
        key = (parts.scheme, parts.hostname, port)
        pool = self._pools.get(key)
        if pool is None:
            context = None if parts.scheme == "http" else self._ssl_context or ssl.create_default_context()
            pool = self._pools[key] = ConnectionPool(parts.hostname, port, self.timeout, self.headers, ssl=context)
        return pool, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    async def request(self, method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                      *, json: Any = None, timeout: float | None = None) -> RawReply:
        """The whole answer (any status); ``json`` is sent as the body, encoded."""
        return await self._send(ConnectionPool.request, method, url, body, headers, json, timeout)

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                     *, json: Any = None, timeout: float | None = None) -> AsyncIterator[StreamedReply]:
        """The answer with its body still to read; leaving the block closes it."""
        reply = await self.open(method, url, body, headers, json=json, timeout=timeout)
        try:
            yield reply
        finally:
            reply.close()

    async def open(self, method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                   *, json: Any = None, timeout: float | None = None) -> StreamedReply:
        """As :meth:`stream`, for a caller that closes the reply itself (``reply.close()``, no await)."""
        return await self._send(ConnectionPool.open, method, url, body, headers, json, timeout)

    async def _send(self, send: Callable[..., Awaitable[R]], method: str, url: str, body: bytes | None,
                    headers: dict[str, str] | None, json: Any, timeout: float | None) -> R:
        """``send`` (``ConnectionPool.request`` or ``.open``) on ``url``'s pool, the reply tagged with its URL."""
        pool, path = self.pool_of(url)
        body, headers = _with_json(body, headers, json)
        reply = await send(pool, method, path, body, headers, timeout)
        reply.url = url
        return reply

    async def close(self) -> None:
        pools, self._pools, self._routes = list(self._pools.values()), {}, {}
        for pool in pools:
            await pool.close()


def probe_status(url: str, timeout: float = 2.0) -> int | None:
    """A ``GET``'s status from synchronous code (a launcher polling ``/health``); None when nothing answered.

    Runs on its own event loop in a short-lived thread, so it works whether or not the caller's thread runs one.
    """
    status: list[int | None] = [None]

    async def ask() -> None:
        client = HttpClient(timeout)
        try:
            status[0] = (await client.request("GET", url)).status
        except (HttpError, asyncio.TimeoutError):
            pass
        finally:
            await client.close()

    worker = threading.Thread(target=asyncio.run, args=(ask(),), name="promptgym-probe")
    worker.start()
    worker.join()
    return status[0]


_JSON_HEADERS = {"Content-Type": "application/json"}


def _with_json(body: bytes | None, headers: dict[str, str] | None,
               value: Any) -> tuple[bytes | None, dict[str, str] | None]:
    if value is None:
        return body, headers
    return jsonlib.dumps(value).encode(), _JSON_HEADERS if not headers else {**_JSON_HEADERS, **headers}


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Status, headers and whether the connection stays open (informational 1xx answers skipped)."""
    while True:
        line = await reader.readline()
        if not line:
            raise HttpError("the server closed the connection without answering")
        parts = line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise HttpError(f"not an HTTP status line: {line[:80]!r}")
        version, status = parts[0], int(parts[1])
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADER_LINES):
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            raise HttpError(f"more than {MAX_HEADER_LINES} header lines")
        if not 100 <= status < 200:
            connection = headers.get("connection", "").lower()
            keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
            return status, headers, keep_alive


async def _read_chunk(reader: asyncio.StreamReader) -> bytes:
    """The next chunk of a ``chunked`` body; ``b""`` (trailers read) at the last one."""
    size_line = await reader.readline()
    try:
        size = int(size_line.split(b";", 1)[0].strip(), 16)
    except ValueError:
        raise HttpError(f"bad chunk size line: {size_line[:40]!r}") from None
    if size == 0:
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return b""
    chunk = await reader.readexactly(size)
    await reader.readexactly(2)
    return chunk


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while chunk := await _read_chunk(reader):
            chunks.append(chunk)
        return b"".join(chunks)
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise HttpError(f"bad Content-Length: {length!r}")
        return await reader.readexactly(int(length))
    return await reader.read()  # neither: the body runs to the end of the connection
