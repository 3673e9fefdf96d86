"""A counting HTTP proxy in front of an OpenAI-compatible server (e.g. llama.cpp's).

Every framework's LM calls are counted at the wire, not by the framework's own
counters: requests per endpoint, HTTP statuses, and prompt/completion tokens read from
each response's ``usage`` (streamed responses are buffered and their last usage read).

    python bench/counting_proxy.py --upstream http://127.0.0.1:8080 --port 8932
    curl http://127.0.0.1:8932/stats          # counts;  POST /stats/reset zeroes them

``--json-object-schema`` rewrites ``response_format`` of type ``json_schema`` into
``{"type": "json_object", "schema": ...}``: llama_cpp.server 0.3.36 answers 422 to the
former and constrains decoding with the latter (synalinks and DSPy send the former).

In-process: ``with start_counting_proxy("http://127.0.0.1:8080") as proxy: proxy.url``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
import urllib.parse
from collections import Counter
from typing import Any

try:  # imported as ``bench.counting_proxy`` or run as a script from bench/
    from .fasthttp import FastHandler, FastServer, ServerThread
except ImportError:  # pragma: no cover - script mode
    from fasthttp import FastHandler, FastServer, ServerThread  # type: ignore[no-redef]

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate", "content-encoding"}


class WireStats:
    """Thread-safe counters of what crossed the proxy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._counts: Counter[str] = Counter()
            self._status: Counter[str] = Counter()
            self._upstream_s = 0.0

    def record(self, kind: str, status: int, usage: dict[str, Any], seconds: float) -> None:
        with self._lock:
            self._counts["requests"] += 1
            self._counts[kind] += 1
            self._counts["errors"] += status >= 400
            self._counts["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self._counts["completion_tokens"] += int(usage.get("completion_tokens") or 0)
            self._status[str(status)] += 1
            self._upstream_s += seconds

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            base = {"requests": 0, "chat_completions": 0, "embeddings": 0, "errors": 0,
                    "prompt_tokens": 0, "completion_tokens": 0}
            return {**base, **self._counts, "by_status": dict(self._status),
                    "upstream_seconds": round(self._upstream_s, 3)}


def endpoint_kind(path: str) -> str:
    """Counter name for a request path."""
    if path.endswith("/chat/completions"):
        return "chat_completions"
    if path.endswith("/completions"):
        return "completions"
    if path.endswith("/embeddings"):
        return "embeddings"
    return "other"


def response_usage(body: bytes) -> dict[str, Any]:
    """``usage`` of a JSON response, or the last one in an SSE stream; ``{}`` if none."""
    try:
        return json.loads(body).get("usage") or {}
    except (ValueError, AttributeError):
        pass
    usage: dict[str, Any] = {}
    for line in body.splitlines():
        if line.startswith(b"data:") and b'"usage"' in line:
            try:
                usage = json.loads(line[5:]).get("usage") or usage
            except ValueError:
                continue
    return usage


def to_json_object_schema(request: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a ``json_schema`` response_format into llama.cpp's ``json_object`` + schema."""
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema", {})
        request = {**request, "response_format": {"type": "json_object", "schema": schema}}
    return request


class ProxyHandler(FastHandler):
    """Forwards every request to ``upstream`` over one keep-alive connection per client."""

    upstream: urllib.parse.SplitResult
    stats: WireStats
    rewrite_json_schema: bool = False
    timeout: float = 600.0

    _upstream_connection: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        # A handler lives as long as its client's keep-alive connection: one upstream each.
        if self._upstream_connection is None:
            self._upstream_connection = http.client.HTTPConnection(
                self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=self.timeout)
        return self._upstream_connection

    def finish(self) -> None:
        super().finish()
        if self._upstream_connection is not None:
            self._upstream_connection.close()

    def _forward(self, method: str) -> None:
        if self.path.rstrip("/") == "/stats" and method == "GET":
            self.send_json(200, self.stats.snapshot())
            return
        if self.path.rstrip("/") == "/stats/reset" and method == "POST":
            self.stats.reset()
            self.send_json(200, {"ok": True})
            return
        body = self.read_body()
        if self.rewrite_json_schema and body and self.path.endswith("/chat/completions"):
            body = json.dumps(to_json_object_schema(json.loads(body))).encode()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
        headers["Content-Length"] = str(len(body))
        path = self.upstream.path.rstrip("/") + self.path
        started = time.perf_counter()
        try:
            status, reply_headers, reply = self._exchange(method, path, body, headers)
        except OSError as exc:
            self.stats.record(endpoint_kind(self.path), 502, {}, time.perf_counter() - started)
            self.send_json(502, {"error": {"message": f"upstream unreachable: {exc}"}})
            return
        self.stats.record(endpoint_kind(self.path), status, response_usage(reply), time.perf_counter() - started)
        self.send_raw(status, reply, reply_headers)

    def _exchange(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        for attempt in (1, 2):  # a kept-alive upstream connection may have been closed meanwhile
            connection = self._connection()
            try:
                connection.request(method, path, body=body or None, headers=headers)
                response = connection.getresponse()
                reply = response.read()
                kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
                return response.status, kept, reply
            except (http.client.HTTPException, ConnectionError):
                connection.close()
                self._upstream_connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")


def make_proxy(upstream: str, port: int = 0, rewrite_json_schema: bool = False) -> FastServer:
    """Build (not start) a counting proxy on 127.0.0.1 in front of ``upstream``."""
    attrs = {"upstream": urllib.parse.urlsplit(upstream.rstrip("/")), "stats": WireStats(),
             "rewrite_json_schema": rewrite_json_schema}
    return FastServer(("127.0.0.1", port), type("Handler", (ProxyHandler,), attrs))


def start_counting_proxy(upstream: str, port: int = 0, rewrite_json_schema: bool = False) -> ServerThread:
    """Start a counting proxy in a daemon thread; ``.url``, ``.port``, ``.stop()``."""
    return ServerThread(make_proxy(upstream, port, rewrite_json_schema)).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:8080")
    parser.add_argument("--port", type=int, default=8932)
    parser.add_argument("--json-object-schema", action="store_true",
                        help="rewrite json_schema response_format to llama.cpp's json_object+schema")
    args = parser.parse_args()
    server = make_proxy(args.upstream, args.port, args.json_object_schema)
    print(f"counting proxy on http://127.0.0.1:{server.server_address[1]} -> {args.upstream}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
