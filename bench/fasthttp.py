"""Tiny stdlib HTTP plumbing shared by the bench servers (fake model server, counting proxy).

Python's ``http.server`` writes headers and body in separate ``send`` calls; with Nagle
on, the second write waits for the client's delayed ACK (~40 ms on Linux). Here every
response goes out in one write on a socket with ``TCP_NODELAY``, so a loopback round
trip costs well under a millisecond.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class FastServer(ThreadingHTTPServer):
    """Threaded server with a deep accept backlog (32 clients connect at once)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


class FastHandler(BaseHTTPRequestHandler):
    """Keep-alive handler whose responses are one write each, with Nagle off."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # honoured by StreamRequestHandler.setup()

    def log_message(self, format: str, *args: Any) -> None:
        """Stay silent: a log line per request would cost more than the request."""

    def read_body(self) -> bytes:
        """Return the request body (Content-Length framed; clients here never chunk)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def read_json(self) -> Any:
        """Return the request body parsed as JSON (``{}`` when empty)."""
        body = self.read_body()
        return json.loads(body) if body else {}

    def send_raw(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Send status line, headers and body in a single ``write``."""
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        merged = {"Content-Type": "application/json", **(headers or {})}
        merged["Content-Length"] = str(len(body))
        lines += [f"{k}: {v}" for k, v in merged.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head + body)
        self.log_request(status)

    def send_json(self, status: int, payload: Any) -> None:
        """Serialise ``payload`` and send it as one JSON response."""
        self.send_raw(status, json.dumps(payload).encode())


class ServerThread:
    """Run a :class:`FastServer` in a daemon thread; ``port=0`` picks a free port.

    >>> srv = ServerThread(FastServer(("127.0.0.1", 0), FastHandler)).start()
    >>> srv.port > 0
    True
    >>> srv.stop()
    """

    def __init__(self, server: FastServer) -> None:
        self.server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        """Start serving (a no-op when already started)."""
        if not self._thread.is_alive():
            self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
