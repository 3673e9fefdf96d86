"""An instant OpenAI-compatible model server for measuring framework overhead.

Answers at once, with no model behind it:

- ``POST /v1/chat/completions``: with a ``response_format`` carrying a JSON schema
  (``json_schema`` or llama.cpp's ``{"type": "json_object", "schema": ...}``), a minimal
  valid instance of that schema; with a bare ``json_object``, an object holding the
  output fields named in the prompt; otherwise plain text in DSPy's ChatAdapter field
  format (``[[ ## answer ## ]]`` ... ``[[ ## completed ## ]]``) when the prompt asks
  for it, a JSON object of those fields when the prompt asks for "a JSON object"
  (DSPy's JSONAdapter without ``response_format``), else ``"x"``.
- ``POST /v1/embeddings``: small constant unit vectors (``dimensions`` honoured).
- ``GET /v1/models``: one model, ``fake``.
- ``GET /stats``: request counts; ``POST /stats/reset`` zeroes them.

``latency_s`` (``--latency-ms``) holds every chat completion that long before it answers, any number
at once (one thread per connection), like a model server with unlimited batch capacity.
``fail_every`` (``--fail-every N``) makes every N-th chat request answer ``500`` at once (a flaky
server: N=3 fails a third of the requests, retries included).

A request with ``stream: true`` is answered with server-sent events, one per word, ``chunk_latency_s``
(``--chunk-ms``) apart, usage last when ``stream_options.include_usage`` asks; ``stream_words``
(``--stream-words N``) makes a plain-text answer ``w0 w1 ... w<N-1>``. ``/stats`` counts
``streams`` and ``streams_broken`` (the client left before the end).

Run: ``python bench/fake_openai_server.py --port 8931``; or in-process::

    with start_fake_server() as server:
        print(server.url)  # http://127.0.0.1:<port>
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import Counter
from typing import Any

try:  # imported as ``bench.fake_openai_server`` or run as a script from bench/
    from .fasthttp import FastHandler, FastServer, ServerThread
except ImportError:  # pragma: no cover - script mode
    from fasthttp import FastHandler, FastServer, ServerThread  # type: ignore[no-redef]

MODEL_ID = "fake"
STRING_VALUE = "x"

# --- minimal instance of a JSON schema -------------------------------------------


def schema_instance(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """Return a small value that validates against ``schema``.

    >>> schema_instance({"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}}})
    {'a': 3}
    """
    if not isinstance(schema, dict) or depth > 32:
        return STRING_VALUE
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        target = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
        return schema_instance(target, defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):  # prefer a non-null branch: parsers treat None as missing
            branches = [b for b in schema[key] if not (isinstance(b, dict) and b.get("type") == "null")]
            return schema_instance((branches or schema[key])[0], defs, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(part if isinstance(part, dict) else {})
        return schema_instance(merged, defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    return _typed_instance(kind, schema, defs, depth)


def _typed_instance(kind: str, schema: dict[str, Any], defs: dict[str, Any], depth: int) -> Any:
    if kind == "object":
        props = schema.get("properties", {})
        return {name: schema_instance(sub, defs, depth + 1) for name, sub in props.items()}
    if kind == "array":
        item = schema_instance(schema.get("items", {}), defs, depth + 1)
        return [item] * int(schema.get("minItems", 0))
    if kind == "string":
        return STRING_VALUE * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = max(0, low) if isinstance(low, (int, float)) else 0
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            value = schema["exclusiveMinimum"] + 1
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    return None


# --- answers for prompt-formatted adapters (DSPy) --------------------------------

_DSPY_OUTPUTS = re.compile(r"Your output fields are:\s*(.*?)(?:\n\s*\n|All interactions will be)", re.DOTALL)
_DSPY_FIELD = re.compile(r"^\s*\d+\.\s*`(\w+)`\s*\(([^)]*)\)", re.MULTILINE)
_TYPE_VALUES: dict[str, Any] = {"int": 0, "float": 0.0, "bool": True, "list": [], "dict": {}}


def prompt_output_fields(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Output fields (name -> fake value) that a DSPy-style system prompt declares."""
    system = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    block = _DSPY_OUTPUTS.search(system)
    if not block:
        return {}
    fields: dict[str, Any] = {}
    for name, type_name in _DSPY_FIELD.findall(block.group(1)):
        literal = re.search(r"Literal\[['\"]?([^'\",\]]+)", type_name)
        base = type_name.split("[", 1)[0].strip()
        fields[name] = literal.group(1) if literal else _TYPE_VALUES.get(base, STRING_VALUE)
    return fields


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def chat_answer(request: dict[str, Any]) -> str:
    """The assistant message's content for a chat-completions request."""
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return json.dumps(schema_instance(fmt.get("json_schema", {}).get("schema", {})))
    if fmt.get("type") == "json_object":
        if "schema" in fmt:
            return json.dumps(schema_instance(fmt["schema"]))
        return json.dumps(prompt_output_fields(request.get("messages", [])) or {"answer": STRING_VALUE})
    messages = request.get("messages", [])
    fields = prompt_output_fields(messages)
    if not fields:
        return STRING_VALUE
    if any("a JSON object" in _text(m.get("content")) for m in messages):  # DSPy's JSONAdapter
        return json.dumps(fields)
    parts = [f"[[ ## {name} ## ]]\n{json.dumps(v) if not isinstance(v, str) else v}" for name, v in fields.items()]
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


# --- the server ------------------------------------------------------------------


class Stats:
    """Thread-safe request counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, key: str) -> int:
        """Count one ``key`` request; returns how many there have been."""
        with self._lock:
            self._counts[key] += 1
            self._counts["requests"] += 1
            return self._counts[key]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {"requests": 0, **self._counts}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


def _completion(request: dict[str, Any]) -> dict[str, Any]:
    content = chat_answer(request)
    prompt_chars = sum(len(_text(m.get("content"))) for m in request.get("messages", []))
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    n = int(request.get("n") or 1)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", MODEL_ID),
        "choices": [{**choice, "index": i} for i in range(n)],
        "usage": {
            "prompt_tokens": prompt_chars // 4 + 1,
            "completion_tokens": len(content) // 4 + 1,
            "total_tokens": prompt_chars // 4 + len(content) // 4 + 2,
        },
    }


def _embeddings(request: dict[str, Any]) -> dict[str, Any]:
    texts = request.get("input", [])
    texts = [texts] if isinstance(texts, str) else texts
    dim = int(request.get("dimensions") or 8)
    vector = [dim**-0.5] * dim
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(len(texts))]
    usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
    return {"object": "list", "data": data, "model": request.get("model", MODEL_ID), "usage": usage}


class FakeOpenAIHandler(FastHandler):
    """Routes the few endpoints the peers use; unknown paths get a JSON 404."""

    stats: Stats  # set per server class by make_server()
    log_file: Any = None
    latency_s: float = 0.0
    fail_every: int = 0
    chunk_latency_s: float = 0.0
    stream_words: int = 0

    def do_GET(self) -> None:
        path = self.path.rstrip("/")
        if path.endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "bench"}]})
        elif path == "/stats":
            self.send_json(200, self.stats.snapshot())
        elif path in ("/health", ""):
            self.send_json(200, {"status": "ok"})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        path = self.path.rstrip("/")
        try:
            request = self.read_json()
        except json.JSONDecodeError as exc:
            self.send_json(400, {"error": {"message": f"bad JSON: {exc}"}})
            return
        if self.log_file is not None:
            self.log_file.write(json.dumps({"path": path, "user_agent": self.headers.get("User-Agent"), "body": request}) + "\n")
            self.log_file.flush()
        if path.endswith("/chat/completions"):
            number = self.stats.add("chat_completions")
            if self.fail_every and number % self.fail_every == 0:
                self.stats.add("chat_failures")
                self.send_json(500, {"error": {"message": "injected failure"}})
                return
            if self.latency_s:
                time.sleep(self.latency_s)
            if request.get("stream"):
                self.send_stream(request)
            else:
                self.send_json(200, _completion(request))
        elif path.endswith("/embeddings"):
            self.stats.add("embeddings")
            self.send_json(200, _embeddings(request))
        elif path == "/stats/reset":
            self.stats.reset()
            self.send_json(200, {"ok": True})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})


    def send_stream(self, request: dict[str, Any]) -> None:
        """The completion as SSE events, one word each; the connection closes at the end (no length to frame it)."""
        self.stats.add("streams")
        whole = _completion(request)
        if self.stream_words and not request.get("response_format"):
            whole["choices"][0]["message"]["content"] = " ".join(f"w{i}" for i in range(self.stream_words))
        base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": whole["model"]}
        pieces = re.findall(r"\s+|\S+\s*", whole["choices"][0]["message"]["content"])
        events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
        events += [{"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (request.get("stream_options") or {}).get("include_usage"):
            events.append({"choices": [], "usage": whole["usage"]})
        self.close_connection = True
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            for event in events:
                if self.chunk_latency_s:
                    time.sleep(self.chunk_latency_s)
                self.wfile.write(f"data: {json.dumps({**base, **event})}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.stats.add("streams_broken")


def make_server(port: int = 0, log_path: str | None = None, latency_s: float = 0.0, fail_every: int = 0,
                chunk_latency_s: float = 0.0, stream_words: int = 0) -> FastServer:
    """Build (not start) a fake server on 127.0.0.1; ``log_path`` records each request body."""
    attrs: dict[str, Any] = {"stats": Stats(), "latency_s": latency_s, "fail_every": fail_every,
                             "chunk_latency_s": chunk_latency_s, "stream_words": stream_words}
    if log_path:
        attrs["log_file"] = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the server
    return FastServer(("127.0.0.1", port), type("Handler", (FakeOpenAIHandler,), attrs))


def start_fake_server(port: int = 0, log_path: str | None = None, latency_s: float = 0.0,
                      fail_every: int = 0, chunk_latency_s: float = 0.0, stream_words: int = 0) -> ServerThread:
    """Start a fake server in a daemon thread; ``.url``, ``.port``, ``.stop()``."""
    return ServerThread(make_server(port, log_path, latency_s, fail_every, chunk_latency_s, stream_words)).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8931)
    parser.add_argument("--log-requests", metavar="PATH", help="append each request body as a JSON line")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="hold each chat completion this long")
    parser.add_argument("--fail-every", type=int, default=0, help="answer 500 to every N-th chat request")
    parser.add_argument("--chunk-ms", type=float, default=0.0, help="pause between the events of a streamed answer")
    parser.add_argument("--stream-words", type=int, default=0, help="a streamed plain-text answer of this many words")
    args = parser.parse_args()
    server = make_server(args.port, args.log_requests, args.latency_ms / 1000, args.fail_every, args.chunk_ms / 1000,
                         args.stream_words)
    print(f"fake OpenAI server on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
