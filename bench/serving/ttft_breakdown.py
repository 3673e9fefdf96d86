"""Where a streamed answer's first token waits inside ``promptgym serve``, with no model: a paced fake engine.

    .venv/bin/python bench/serving/ttft_breakdown.py --n 60                    # idle CPUs while it "generates"
    .venv/bin/python bench/serving/ttft_breakdown.py --n 60 --burn-threads 2   # 2 cores busy, as llama.cpp's are
    git worktree add --detach /tmp/ttft-base COMMIT                             # then, interleaved with that code:
    .venv/bin/python bench/serving/ttft_breakdown.py --n 60 --burn-threads 2 --baseline /tmp/ttft-base

The server is ``promptgym serve``'s own stack (its uvicorn settings, socket and logging; the serving
middleware; the chat-completions route; ``LanguageModel.stream`` with its response cache; the
embedded engine's ``LlamaCppEngine.stream`` with its worker thread) in a process of its own, with
llama.cpp replaced by :class:`PacedLlama`: a first content token ready ``--first-ms`` after the
call, the next ones ``--token-ms`` apart. With ``--burn-threads N`` the fake spends that time
busy on N threads that hold no GIL (hashing), as llama.cpp's threads keep every core busy while
it reads the prompt and writes each token.

Each request (distinct prompts, so the cache never answers) is read once with the official
``openai`` client and once with a raw ``http.client`` SSE reader, alternating which goes first;
the engine's own first token is the same fake called in this process. The server stamps each
step of the request with ``time.perf_counter()`` (CLOCK_MONOTONIC: one clock for both
processes) and hands the stamps over at ``GET /probe``, so the added time splits into:

client -> ASGI (the client's request, the socket, uvicorn's parse), ASGI -> route (middleware,
routing, body validation), route -> cache+reserve (the stream objects, the admission slot, the
response-cache lookup), -> engine stream (spend reservation, the model's slot), -> worker
thread (the executor hop), -> llama called (the context's lock, sampling options), the engine's
own first token, -> event loop (the thread hop back), -> the first piece up through the stream's
layers (meter, caps, StreamingIterator, the route), -> the response head sent (FastAPI and
Starlette), -> first content sent (the role chunk, SSE framing), -> client reads it (socket,
the client's parse).
Writes bench/results/serving_ttft_breakdown.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH / "serving"))
sys.path.insert(0, os.environ.get("TTFT_CODE") or str(REPO))  # the server may run another checkout's promptgym

import promptgym  # noqa: E402,F401 - first, from TTFT_CODE: stream.py would import this checkout's
from stream import get_json, percentile, start_process, stop, wait_until_up  # noqa: E402

MODEL = "local/smollm2-135m-instruct"
RESULTS = BENCH / "results"
FIRST_CONTENT = re.compile(rb'"content": "[^"]')  # a body with a piece of content (the role chunk's is "")
SEGMENTS = {
    "client_to_asgi": ("t0", "asgi"), "asgi_to_route": ("asgi", "route"), "route_to_reserve": ("route", "reserve"),
    "reserve_to_engine_stream": ("reserve", "engine_stream"), "engine_stream_to_thread": ("engine_stream", "thread"),
    "thread_to_llama_call": ("thread", "create"), "engine_own_first_token": ("create", "ready"),
    "thread_to_event_loop": ("ready", "loop_got"), "event_loop_to_first_piece": ("loop_got", "first_piece"),
    "first_piece_to_head_sent": ("first_piece", "head"), "head_to_first_send": ("head", "first_send"),
    "first_send_to_client": ("first_send", "t_first"),
}


# -- the fake llama.cpp ----------------------------------------------------------------------------


class Burner:
    """Keeps ``threads`` cores busy (the caller's thread one of them) for a while, without the GIL."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.deadline = 0.0
        self.go = threading.Condition()
        self.block = os.urandom(16 * 1024)  # hashlib drops the GIL for inputs over 2 KB
        for _ in range(max(0, threads - 1)):
            threading.Thread(target=self._helper, daemon=True).start()

    def _helper(self) -> None:
        while True:
            with self.go:
                self.go.wait_for(lambda: time.perf_counter() < self.deadline)
            self._spin()

    def _spin(self) -> None:
        while time.perf_counter() < self.deadline:
            hashlib.sha256(self.block).digest()

    def busy(self, seconds: float) -> None:
        """Spend ``seconds``: busy on every thread when burning, else asleep (an idle wait)."""
        if self.threads < 1:
            time.sleep(seconds)
            return
        with self.go:
            self.deadline = time.perf_counter() + seconds
            self.go.notify_all()
        self._spin()


class PacedLlama:
    """Streams like llama-cpp-python's ``create_chat_completion(stream=True)``, on a clock.

    ``stamps`` (a dict, or None) gets ``create`` when the stream starts and ``ready`` when its
    first content token is.
    """

    def __init__(self, first_s: float, token_s: float, tokens: int, burner: Burner) -> None:
        self.first_s, self.token_s, self.tokens, self.burner = first_s, token_s, tokens, burner
        self.n_tokens = 0
        self.stamps: dict[str, float] | None = None

    def create_chat_completion(self, stream: bool = False, **kwargs: Any) -> Iterator[dict[str, Any]]:
        assert stream, "the fake only streams"
        stamps = self.stamps
        if stamps is not None:
            stamps["create"] = time.perf_counter()
        yield {"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}
        self.burner.busy(self.first_s)  # the prompt read, and the first token
        for index in range(self.tokens):
            if index:
                self.burner.busy(self.token_s)
            elif stamps is not None:
                stamps["ready"] = time.perf_counter()
            self.n_tokens = 20 + index + 1
            yield {"choices": [{"delta": {"content": f" w{index}"}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "length"}]}

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(range(text.count(b" w")))


def engine_own_ttft(llama: PacedLlama) -> float:
    """Seconds from the call to the first content token, read in the caller's thread (as the real bench does)."""
    started = time.perf_counter()
    for chunk in llama.create_chat_completion(stream=True):
        if (chunk["choices"][0].get("delta") or {}).get("content"):
            first = time.perf_counter() - started
            break
    return first


# -- the server (its own process) ----------------------------------------------------------------------


def serve(port: int, llama: PacedLlama) -> None:
    """``promptgym serve --model local/...`` with the fake engine, stamping each step of the current request."""
    from promptgym.cli.commands import serve as serve_command
    from promptgym.cli.common import secret_masker
    from promptgym.lm.language_model import LanguageModel
    from promptgym.lm.local_engine import LlamaCppEngine
    from promptgym.serving import create_app, routes, streaming

    stamps: dict[str, float] = {}

    def stamp(name: str) -> None:
        stamps.setdefault(name, time.perf_counter())

    class ProbedEngine(LlamaCppEngine):
        async def stream(self, request: Any) -> Any:
            stamp("engine_stream")
            async for chunk in super().stream(request):
                if chunk.content:
                    stamp("loop_got")
                yield chunk

        def _stream_sync(self, *args: Any) -> None:
            stamp("thread")
            super()._stream_sync(*args)

    engine = ProbedEngine(Path("fake.gguf"))
    engine._llama = llama
    model = LanguageModel(model=MODEL)  # the response cache on, as `serve --model` has it
    model._engine = engine

    reserve = LanguageModel._reserve

    async def probed_reserve(self: Any, request: Any) -> float:
        stamp("reserve")
        return await reserve(self, request)

    LanguageModel._reserve = probed_reserve  # type: ignore[method-assign]
    stream_model_answer = routes.stream_model_answer

    async def probed_route(*args: Any) -> Any:
        stamp("route")
        return await stream_model_answer(*args)

    routes.stream_model_answer = probed_route
    start = streaming.AnswerStream.start

    async def probed_start(self: Any) -> None:
        await start(self)
        stamp("first_piece")

    streaming.AnswerStream.start = probed_start  # type: ignore[method-assign]
    app = create_app({}, models=[model])

    async def probed_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/probe":
            body = json.dumps(stamps).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and scope["path"] == "/v1/chat/completions":
            stamps.clear()
            stamp("asgi")
            llama.stamps = stamps

        async def probed_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                stamp("head")
            body = message.get("body") or b""
            if FIRST_CONTENT.search(body):
                stamp("first_send")
            await send(message)

        await app(scope, receive, probed_send)

    serve_command.configure_logging(secret_masker(None))
    config = serve_command.uvicorn_config(probed_app, 5.0, serve_command.READ_TIMEOUT_S,
                                          serve_command.MAX_CONNECTIONS)
    serve_command.run_uvicorn(config, "127.0.0.1", port, described=[])


# -- the client ------------------------------------------------------------------------------------------


def body_of(index: int, tokens: int) -> dict[str, Any]:
    return {"model": MODEL, "temperature": 0.0, "max_tokens": tokens, "stream": True,
            "messages": [{"role": "user", "content": f"Give one short fact about the number {index}."}]}


def openai_first(client: Any, body: dict[str, Any]) -> float:
    """perf_counter at the first content delta, read with the official client (then read to the end)."""
    first = None
    stream = client.chat.completions.create(model=body["model"], messages=body["messages"], temperature=0.0,
                                            max_tokens=body["max_tokens"], stream=True)
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    return first


def raw_first(host: str, port: int, body: dict[str, Any]) -> float:
    """perf_counter at the first content delta, read with http.client and json (then read to the end)."""
    connection = http.client.HTTPConnection(host, port, timeout=60)
    first = None
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        for line in response:
            if first is None and line.startswith(b"data: {"):
                event = json.loads(line[6:])
                if event.get("choices") and event["choices"][0]["delta"].get("content"):
                    first = time.perf_counter()
    finally:
        connection.close()
    return first


def start_server(code: Path, first_ms: float, token_ms: float, tokens: int, burn_threads: int) -> Any:
    """This script's server, on the promptgym of ``code`` (a checkout); ``(process, url)``."""
    os.environ["TTFT_CODE"] = str(code)  # the child imports promptgym from there
    return start_process([sys.executable, __file__, "--serve", "--first-ms", str(first_ms), "--token-ms",
                          str(token_ms), "--tokens", str(tokens), "--burn-threads", str(burn_threads)],
                         r"serving on (http://\S+)")


def one_request(url: str, client: Any, reader: str, body: dict[str, Any]) -> dict[str, float]:
    """One streamed request read by ``reader``; its segments in ms, ``total_ms`` from the call to the first delta."""
    host, port = url.removeprefix("http://").split(":")
    t0 = time.perf_counter()
    t_first = openai_first(client, body) if reader == "openai" else raw_first(host, int(port), body)
    stamps = {"t0": t0, "t_first": t_first, **get_json(f"{url}/probe")}
    segments = {name: (stamps[end] - stamps[start]) * 1000 for name, (start, end) in SEGMENTS.items()}
    return {**segments, "total_ms": (t_first - t0) * 1000,
            "added_ms": (t_first - t0) * 1000 - segments["engine_own_first_token"]}


def summary(rows: list[dict[str, Any]], side: str, reader: str) -> dict[str, Any]:
    measured = [row[side][reader] for row in rows]
    added = [m["added_ms"] for m in measured]
    return {"total_p50_ms": round(statistics.median(m["total_ms"] for m in measured), 3),
            "added_p50_ms": round(statistics.median(added), 3), "added_p90_ms": round(percentile(added, 90), 3),
            "added_min_ms": round(min(added), 3),
            "segments_p50_ms": {name: round(statistics.median(m[name] for m in measured), 3) for name in SEGMENTS}}


def measure(n: int, first_ms: float, token_ms: float, tokens: int, burn_threads: int,
            baseline: Path | None) -> dict[str, Any]:
    """``n`` rows; each: the engine's own first token, then each server (this code, and ``baseline``'s when
    given) read by each reader, the order alternating row by row."""
    import openai  # deferred: only the client side needs it

    codes = {"this": REPO, **({"baseline": baseline} if baseline else {})}
    servers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PROMPTGYM_CACHE_DIR"] = cache  # the children inherit it: their response cache is a fresh file
        try:
            for side, code in codes.items():
                servers[side] = start_server(code, first_ms, token_ms, tokens, burn_threads)
                wait_until_up(servers[side][1])
            clients = {side: openai.OpenAI(api_key="unused", base_url=f"{url}/v1", max_retries=0, timeout=60)
                       for side, (_, url) in servers.items()}
            own = PacedLlama(first_ms / 1000, token_ms / 1000, tokens, Burner(burn_threads))
            rows: list[dict[str, Any]] = []
            prompt = 1000
            for index in range(-3, n):  # three warm-up rounds: connections, the executor's thread, the cache file
                row: dict[str, Any] = {"engine_own_ms": engine_own_ttft(own) * 1000}
                sides = list(servers) if index % 2 == 0 else list(reversed(servers))
                for side in sides:
                    row[side] = {}
                    for reader in (("openai", "raw") if (index // 2) % 2 == 0 else ("raw", "openai")):
                        prompt += 1
                        row[side][reader] = one_request(servers[side][1], clients[side], reader,
                                                        body_of(prompt, tokens))
                if index >= 0:
                    rows.append(row)
        finally:
            for process, _ in servers.values():
                stop(process)
    result: dict[str, Any] = {"bench": "serving_ttft_breakdown", "n": n, "first_ms": first_ms, "token_ms": token_ms,
                              "tokens": tokens, "burn_threads": burn_threads, "cpus": os.cpu_count(),
                              "load_average_1min": os.getloadavg()[0], "baseline_code": str(baseline or ""),
                              "engine_own_p50_ms": round(statistics.median(r["engine_own_ms"] for r in rows), 3)}
    for side in servers:
        result[side] = {reader: summary(rows, side, reader) for reader in ("openai", "raw")}
    if baseline:
        result["this_minus_baseline_added_p50_ms"] = {
            reader: round(statistics.median(r["this"][reader]["added_ms"] - r["baseline"][reader]["added_ms"]
                                            for r in rows), 3) for reader in ("openai", "raw")}
    result["rows"] = rows
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=60, help="requests per reader")
    parser.add_argument("--first-ms", type=float, default=40.0, help="the fake engine's first token")
    parser.add_argument("--token-ms", type=float, default=8.0, help="between its next tokens")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--burn-threads", type=int, default=0, help="threads kept busy while it generates (0: idle)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of other code (e.g. `git worktree add --detach /tmp/base COMMIT`): its server "
                             "is measured too, interleaved")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, PacedLlama(args.first_ms / 1000, args.token_ms / 1000, args.tokens,
                                    Burner(args.burn_threads)))
        return
    result = measure(args.n, args.first_ms, args.token_ms, args.tokens, args.burn_threads, args.baseline)
    out = args.out or RESULTS / "serving_ttft_breakdown.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_suffix(".tmp")
    temporary.write_text(json.dumps(result, indent=2) + "\n")
    temporary.replace(out)  # atomic: a result file is never half written
    print(json.dumps({key: value for key, value in result.items() if key != "rows"}, indent=2))


if __name__ == "__main__":
    main()
