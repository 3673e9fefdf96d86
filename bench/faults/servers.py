"""Misbehaving servers on 127.0.0.1 for the fault bench: one model server, one task app.

The model server takes its fault from the URL, so one server covers every case::

    with start_fault_server() as server:
        url = server.mode_url("401")     # http://127.0.0.1:<port>/m/401/v1
        url = server.mode_url("flaky", fail_every=3)   # every third request answers 500

Modes: ``ok``, ``401``, ``403``, ``500`` (always), ``429`` (always), ``nonjson`` (200, HTML body),
``empty_choices``, ``no_choices``, ``null_content``, ``context_400`` (every chat call: 400 about the
prompt length), ``first_400`` (the first chat call only), ``rf_422`` (json_schema refused with 422,
the rest answered), ``slow`` (sleeps 5 s), ``close`` (drops the connection), ``truncated`` (a short
body), ``garbage_answer`` (a valid reply whose content is not JSON), ``flaky`` (every
``fail_every``-th request answers 500), ``key`` (401 unless the request carries ``Bearer <want>``). ``/stats`` counts requests by mode and response format.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_openai_server import _completion  # noqa: E402
from fasthttp import FastHandler, FastServer, ServerThread  # noqa: E402


class FaultStats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, key: str) -> int:
        with self.lock:
            self.counts[key] += 1
            return self.counts[key]


class FaultHandler(FastHandler):
    stats: FaultStats

    def _route(self) -> tuple[str, dict[str, str], str]:
        """(mode, options, endpoint) from ``/m/<mode>[;k=v]/v1/<endpoint>``; ``tag=`` only names the counter."""
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) < 3 or parts[0] != "m":
            return "ok", {}, "/".join(parts)
        mode, *raw = parts[1].split(";")
        options = dict(item.split("=", 1) for item in raw if "=" in item)
        return mode, options, "/".join(parts[3:] if parts[2] == "v1" else parts[2:])

    def _counter(self, mode: str, options: dict[str, str]) -> str:
        return f"{mode}#{options['tag']}" if "tag" in options else mode

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/stats":
            with self.stats.lock:
                return self.send_json(200, dict(self.stats.counts))
        mode, options, endpoint = self._route()
        if self._fault(mode, options, endpoint, {}):
            return
        self.send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self) -> None:
        mode, options, endpoint = self._route()
        try:
            body = self.read_json()
        except json.JSONDecodeError:
            return self.send_json(400, {"error": {"message": "bad JSON"}})
        if self._fault(mode, options, endpoint, body):
            return
        if endpoint.endswith("embeddings"):
            texts = body.get("input", [])
            return self.send_json(200, {"data": [{"index": i, "embedding": [1.0, 0.5]} for i in range(len(texts))]})
        self.send_json(200, _completion(body))

    def _fault(self, mode: str, options: dict[str, str], endpoint: str, body: dict[str, Any]) -> bool:
        """Answer with the mode's fault; False when the request should get a normal answer."""
        chat = endpoint.endswith("chat/completions")
        counter = self._counter(mode, options)
        number = self.stats.add(f"{counter}:{endpoint}")
        if chat:
            self.stats.add(f"{counter}:format:{(body.get('response_format') or {}).get('type', 'none')}")
        if mode in ("401", "403"):
            self.send_json(int(mode), {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        elif mode == "500":
            self.send_json(500, {"error": {"message": "internal error"}})
        elif mode == "429":
            self.send_raw(429, b'{"error": {"message": "Rate limit reached for requests"}}', {"Retry-After": "0"})
        elif mode == "nonjson" and chat:
            self.send_raw(200, b"<html><body>502 Bad Gateway (proxy)</body></html>", {"Content-Type": "text/html"})
        elif mode == "empty_choices" and chat:
            self.send_json(200, {"id": "x", "choices": [], "usage": {}})
        elif mode == "no_choices" and chat:
            self.send_json(200, {"id": "x", "object": "chat.completion"})
        elif mode == "null_content" and chat:
            self.send_json(200, {"choices": [{"message": {"role": "assistant", "content": None}}]})
        elif mode == "context_400" and chat:
            self.send_json(400, {"error": {"message": "This model's maximum context length is 4096 tokens. "
                                           "However, your messages resulted in 9000 tokens.", "type": "invalid_request_error"}})
        elif mode == "first_400" and chat and number == 1:
            self.send_json(400, {"error": {"message": "temperature: must be <= 2", "type": "invalid_request_error"}})
        elif mode == "rf_422" and chat and (body.get("response_format") or {}).get("type") == "json_schema":
            self.send_json(422, {"error": {"message": "response_format: json_schema is not supported"}})
        elif mode == "slow":
            time.sleep(float(options.get("seconds", 5)))
            return False
        elif mode == "close" and chat:
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
        elif mode == "truncated" and chat:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"choices\": [")
            self.close_connection = True
            self.connection.shutdown(2)
        elif mode == "key" and self.headers.get("Authorization") != f"Bearer {options.get('want', '')}":
            self.send_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        elif mode == "garbage_answer" and chat:
            self.send_json(200, {"choices": [{"message": {"role": "assistant", "content": "I think the answer is 42"}}]})
        elif mode == "flaky" and chat and number % int(options.get("fail_every", 3)) == 0:
            self.send_json(500, {"error": {"message": "flaky"}})
        else:
            return False
        return True


class FaultServer(ServerThread):
    def mode_url(self, mode: str, **options: Any) -> str:
        suffix = "".join(f";{key}={value}" for key, value in options.items())
        return f"{self.url}/m/{mode}{suffix}/v1"

    def stats(self) -> dict[str, int]:
        with self.server.RequestHandlerClass.stats.lock:  # type: ignore[attr-defined]
            return dict(self.server.RequestHandlerClass.stats.counts)  # type: ignore[attr-defined]


def start_fault_server(port: int = 0) -> FaultServer:
    handler = type("Handler", (FaultHandler,), {"stats": FaultStats()})
    return FaultServer(FastServer(("127.0.0.1", port), handler)).start()


class BrokenTaskAppHandler(FastHandler):
    """A task app that answers ``/health`` and breaks ``/task_info`` or ``/rollout`` as its path says.

    ``/bad_json/...``: non-JSON bodies; ``/wrong_shape/...``: JSON of the wrong shape;
    ``/nonjson_rollout/...``: a good task_info, HTML rollouts.
    """

    def _mode_and_endpoint(self) -> tuple[str, str]:
        parts = self.path.strip("/").split("/")
        return parts[0], "/".join(parts[1:])

    def do_GET(self) -> None:
        mode, endpoint = self._mode_and_endpoint()
        if endpoint == "health":
            return self.send_json(200, {"status": "ok", "protocol": 1})
        if mode == "bad_json":
            return self.send_raw(200, b"{not json", {})
        if mode == "wrong_shape":
            return self.send_json(200, {"name": "x", "splits": [1, 2, 3]})
        if mode == "wrong_shape2":
            return self.send_json(200, ["a", "list"])
        self.send_json(200, {"name": "broken", "splits": {"train": [0, 1, 2, 3], "test": [10, 11]},
                             "modules": [{"name": "policy", "instructions": "Solve."}]})

    def do_POST(self) -> None:
        self.read_body()
        mode, _ = self._mode_and_endpoint()
        if mode == "nonjson_rollout":
            return self.send_raw(200, b"<html>oops</html>", {"Content-Type": "text/html"})
        if mode == "nan_reward":
            return self.send_raw(200, b'{"seed": 0, "reward": NaN}', {})
        self.send_json(200, {"seed": 0, "reward": 1.0})


def start_broken_task_app() -> ServerThread:
    return ServerThread(FastServer(("127.0.0.1", 0), BrokenTaskAppHandler)).start()


if __name__ == "__main__":
    server = start_fault_server(int(sys.argv[1]) if len(sys.argv) > 1 else 8941)
    print(f"fault server on {server.url} (modes under /m/<mode>/v1)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
