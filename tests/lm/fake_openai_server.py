"""A tiny OpenAI-compatible server for tests, on 127.0.0.1, in a thread.

It can refuse ``json_schema`` response formats (like llama.cpp's server),
answer with garbage first, fail with 503 a given number of times, or answer
whatever ``fault(body, number)`` returns: ``(status, raw body)`` for the
``number``-th request (from 0), or None for the normal answer. A request with
``stream: true`` is answered with server-sent events, one per word of the
answer, ``stream_delay_s`` apart; ``streams_broken`` counts the streams whose
client left before the end.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Fault = Callable[[dict[str, Any], int], "tuple[int, str] | None"]


class FakeOpenAIServer:
    def __init__(self, answer: Callable[[dict[str, Any]], str], refuse_json_schema: bool = False,
                 failures_before_success: int = 0, fault: Fault | None = None, stream_delay_s: float = 0.0,
                 stream_usage: bool = True) -> None:
        self.answer = answer
        self.stream_usage = stream_usage  # False: a server that ignores stream_options.include_usage
        self.stream_delay_s = stream_delay_s
        self.streams_finished = 0
        self.streams_broken = 0
        self.refuse_json_schema = refuse_json_schema
        self.failures_left = failures_before_success
        self.fault = fault
        self.requests: list[dict[str, Any]] = []
        self.gets: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.gets.append(self.path)
                faulty = server.fault({"path": self.path}, -1) if server.fault else None
                if faulty is not None:
                    return self._send_raw(*faulty)
                self._send(200, {"object": "list", "data": [{"id": "test", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                number = len(server.requests)
                server.requests.append(body)
                faulty = server.fault(body, number) if server.fault else None
                if faulty is not None:
                    return self._send_raw(*faulty)
                if server.failures_left > 0:
                    server.failures_left -= 1
                    return self._send(503, {"error": "busy"})
                if self.path.endswith("/embeddings"):
                    return self._send(200, {"data": [{"index": i, "embedding": [1.0, float(len(t))]}
                                                     for i, t in enumerate(body["input"])],
                                            "usage": {"prompt_tokens": sum(len(t) for t in body["input"]),
                                                      "prompt_tokens_details": {"cached_tokens": 1}}})
                fmt = body.get("response_format") or {}
                if server.refuse_json_schema and fmt.get("type") == "json_schema":
                    return self._send(422, {"error": "json_schema not supported"})
                content = server.answer(body)
                if body.get("stream"):
                    return self._stream(content, server.stream_usage
                                        and bool((body.get("stream_options") or {}).get("include_usage")))
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": content}}],
                                 "usage": {"prompt_tokens": 11, "completion_tokens": 3}})

            def _stream(self, content: str, include_usage: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "test"}
                events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
                events += [{"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                           for piece in re.findall(r"\s+|\S+\s*", content)]
                events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                if include_usage:
                    events.append({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3}})
                try:
                    for event in events:
                        if server.stream_delay_s:
                            time.sleep(server.stream_delay_s)
                        self.wfile.write(f"data: {json.dumps({**base, **event})}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    server.streams_broken += 1
                    return
                server.streams_finished += 1

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                self._send_raw(status, json.dumps(payload))

            def _send_raw(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
