"""A small keep-alive HTTP/1.1 client for plain ``http://`` model servers (vLLM, llama.cpp, Ollama on a LAN).

A request through aiohttp costs about 0.1 ms of CPU on top of the socket work,
which against a fast local server was a third of promptgym's time per call
(docs/benchmarks.md, Benchmark B). This client writes the request in one
``write`` and reads the answer with an asyncio stream: status line, headers,
then a body of ``Content-Length`` bytes, ``chunked`` or up to the end of the
connection. Connections are reused while the server keeps them open; one the
server closed while idle is replaced once, transparently. ``https://`` and
everything else (TLS, redirects, proxies, compression) stays with aiohttp::

    pool = ConnectionPool("127.0.0.1", 8080, timeout=120)
    reply = await pool.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    reply.status, reply.headers["content-type"], reply.body
    await pool.close()
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

MAX_HEADER_LINES = 200


class HttpError(Exception):
    """The connection failed or the server broke the protocol (worth another try)."""


@dataclass
class RawReply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    """Lower-cased names; a repeated header keeps its last value."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    def close(self) -> None:
        self.writer.close()


class ConnectionPool:
    """Keep-alive connections to one ``host:port`` (for one event loop; callers bound the concurrency)."""

    def __init__(self, host: str, port: int, timeout: float, default_headers: dict[str, str] | None = None) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._host_header = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        fixed = {"User-Agent": "promptgym", **(default_headers or {})}
        self._fixed_headers = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._idle: list[_Connection] = []

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: dict[str, str] | None = None) -> RawReply:
        """One request; ``asyncio.TimeoutError`` after ``timeout`` seconds, :class:`HttpError` on a broken connection."""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self._host_header}\r\n{self._fixed_headers}"
                + "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
                + f"Content-Length: {len(body or b'')}\r\n\r\n").encode("latin-1")
        async with asyncio.timeout(self.timeout):  # not wait_for: that starts a task per request
            return await self._exchange(head + (body or b""), method)

    async def _exchange(self, message: bytes, method: str) -> RawReply:
        connection = self._idle_connection() or await self._connect()
        try:
            try:
                return await self._send(connection, message, method)
            except (ConnectionError, asyncio.IncompleteReadError, HttpError):
                if not connection.reused:
                    raise
                connection.close()  # the server closed it while it sat idle: one fresh try
                connection = await self._connect()
                return await self._send(connection, message, method)
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
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=2 ** 20)
        except OSError as error:
            raise HttpError(f"cannot connect to {self.host}:{self.port}: {error}") from None
        return _Connection(reader, writer)

    async def _send(self, connection: _Connection, message: bytes, method: str) -> RawReply:
        connection.writer.write(message)
        status, headers, keep_alive = await _read_head(connection.reader)
        framed = method == "HEAD" or status in (204, 304)
        body = b"" if framed else await _read_body(connection.reader, headers)
        framed = framed or "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        if keep_alive and framed:  # an answer that ran to the end of the connection leaves nothing to reuse
            connection.reused = True
            self._idle.append(connection)
        else:
            connection.close()
        return RawReply(status, body, headers)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


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


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HttpError(f"bad chunk size line: {size_line[:40]!r}") from None
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise HttpError(f"bad Content-Length: {length!r}")
        return await reader.readexactly(int(length))
    return await reader.read()  # neither: the body runs to the end of the connection
