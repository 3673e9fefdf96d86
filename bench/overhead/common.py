"""Shared measurement code for the per-framework overhead scripts.

Runs in every venv (ours and the peers'), so it needs only the stdlib and httpx.
Method, for N predictions of a one-step program against the instant fake server:

- ``wall_s``: wall time of the N predictions (after a short warm-up, not counted), the
  best of ``--repeat`` runs (other load on the machine only ever adds time).
- ``wire_calls``: chat requests the server saw during that time (its ``/stats``).
- ``ms_per_call``: ``wall_s / wire_calls``; the server is instant, so this is the
  client side's cost of one call at that concurrency.
- ``raw_ms_per_call``: the same number of plain POSTs of a similar request at the same
  concurrency from the same process, with http.client in threads (the cheapest Python
  client): the floor any Python client pays for server + loopback.
- ``httpx_async_ms_per_call``: the same through one ``httpx.AsyncClient``, for reference
  (it costs ~1 ms CPU a request by itself, more than some whole frameworks).
- ``overhead_ms_per_call``: ``ms_per_call - raw_ms_per_call``, the framework's own part.
- ``cpu_ms_per_call``: the process's CPU time per call (framework + client + HTTP);
  with 2 cores this, not wall time, limits throughput under concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm downloads it otherwise

DEFAULT_N = 200
DEFAULT_BATCH = 32


@dataclass
class Result:
    """One JSON line of output: a framework at one setting."""

    framework: str
    version: str
    setting: str
    concurrency: int
    n: int
    predictions_ok: int
    wall_s: float
    predictions_per_s: float
    wire_calls: int
    ms_per_call: float
    raw_ms_per_call: float
    overhead_ms_per_call: float
    cpu_ms_per_call: float
    raw_cpu_ms_per_call: float
    httpx_async_ms_per_call: float
    repeat: int
    load_avg_1m: float
    notes: str = ""


def parse_args(description: str) -> argparse.Namespace:
    """The CLI every overhead script takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--base-url", required=True, help="fake server root, e.g. http://127.0.0.1:8931")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="predictions per setting")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="concurrency of the batch setting")
    parser.add_argument("--settings", default="sequential,batch", help="comma-separated: sequential,batch")
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting; the fastest is kept")
    return parser.parse_args()


def questions(n: int) -> list[str]:
    """N distinct questions (distinct so no cache anywhere could answer twice)."""
    return [f"What is {i} plus {i + 1}? Answer with a number." for i in range(n)]


def server_stats(base_url: str) -> dict[str, int]:
    """The fake server's (or counting proxy's) request counters."""
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/stats", timeout=10) as response:
        return json.loads(response.read())


def _raw_request(i: int) -> dict[str, Any]:
    system = "Answer the question. Respond with a JSON object with the key 'answer'."
    return {
        "model": "fake",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": json.dumps({"question": f"q{i}"})}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"answer": {"type": "string"}}}},
        },
    }


def _stdlib_calls(base_url: str, calls: int, concurrency: int) -> None:
    """``calls`` POSTs over ``concurrency`` threads, each with one keep-alive connection."""
    parts = urllib.parse.urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port

    def worker(indices: range) -> None:
        connection = http.client.HTTPConnection(host, port, timeout=30)
        for i in indices:
            body = json.dumps(_raw_request(i))
            connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            json.loads(connection.getresponse().read())
        connection.close()

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, [range(j, calls, concurrency) for j in range(concurrency)]))


async def _httpx_async_calls(base_url: str, calls: int, concurrency: int) -> None:
    """``calls`` POSTs through one ``httpx.AsyncClient``, at most ``concurrency`` in flight."""
    import httpx  # imported late: the peers' import time must not depend on it

    url = f"{base_url.rstrip('/')}/v1/chat/completions"
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def one(i: int) -> None:
            async with gate:
                response = await client.post(url, json=_raw_request(i))
                json.loads(response.content)

        await asyncio.gather(*(one(i) for i in range(calls)))


def _best_of(repeat: int, work: Callable[[], object]) -> tuple[float, float]:
    work()  # warm-up: imports, connections
    runs = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return min(runs)


def raw_baselines(base_url: str, calls: int, concurrency: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Best-of-``repeat`` (wall s, cpu s) of ``calls`` plain requests at ``concurrency``.

    ``stdlib``: http.client in threads, the cheapest Python client (the floor).
    ``httpx_async``: one httpx.AsyncClient, what async frameworks typically pay.
    Runs in a worker thread, so it may be called from inside a running event loop.
    """

    def work() -> dict[str, tuple[float, float]]:
        return {
            "stdlib": _best_of(repeat, lambda: _stdlib_calls(base_url, calls, concurrency)),
            "httpx_async": _best_of(repeat, lambda: asyncio.run(_httpx_async_calls(base_url, calls, concurrency))),
        }

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


@dataclass
class Setting:
    """What is measured: who, at which concurrency, against which server, how often."""

    framework: str
    version: str
    setting: str
    concurrency: int
    n: int
    base_url: str
    repeat: int = 3
    notes: str = ""


@dataclass
class _Run:
    wall: float
    cpu: float
    calls: int
    ok: int


def _result(spec: Setting, runs: list[_Run]) -> Result:
    best = min(runs, key=lambda r: r.wall)  # best-of-R, as timeit does: noise only adds time
    calls = max(best.calls, 1)
    raw = raw_baselines(spec.base_url, calls, spec.concurrency, spec.repeat)
    (raw_wall, raw_cpu), (httpx_wall, _) = raw["stdlib"], raw["httpx_async"]
    per_call, raw_per_call = best.wall / calls, raw_wall / calls
    return Result(
        framework=spec.framework,
        version=spec.version,
        setting=spec.setting,
        concurrency=spec.concurrency,
        n=spec.n,
        predictions_ok=best.ok,
        wall_s=round(best.wall, 4),
        predictions_per_s=round(spec.n / best.wall, 2),
        wire_calls=best.calls,
        ms_per_call=round(per_call * 1e3, 3),
        raw_ms_per_call=round(raw_per_call * 1e3, 3),
        overhead_ms_per_call=round((per_call - raw_per_call) * 1e3, 3),
        cpu_ms_per_call=round(best.cpu / calls * 1e3, 3),
        raw_cpu_ms_per_call=round(raw_cpu / calls * 1e3, 3),
        httpx_async_ms_per_call=round(httpx_wall / calls * 1e3, 3),
        repeat=spec.repeat,
        load_avg_1m=round(os.getloadavg()[0], 2),
        notes=spec.notes,
    )


def _calls(spec: Setting) -> int:
    return server_stats(spec.base_url).get("chat_completions", 0)


def measure(spec: Setting, run: Callable[[], int]) -> Result:
    """Time ``run()`` (the N predictions; returns how many succeeded), best of ``spec.repeat``."""
    runs = []
    for _ in range(spec.repeat):
        before, wall, cpu = _calls(spec), time.perf_counter(), time.process_time()
        ok = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        runs.append(_Run(wall, cpu, _calls(spec) - before, ok))
    return _result(spec, runs)


async def measure_async(spec: Setting, run: Callable[[], Awaitable[int]]) -> Result:
    """:func:`measure` for async frameworks: the program stays on one event loop."""
    runs = []
    for _ in range(spec.repeat):
        before, wall, cpu = _calls(spec), time.perf_counter(), time.process_time()
        ok = await run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        runs.append(_Run(wall, cpu, _calls(spec) - before, ok))
    return _result(spec, runs)


def emit(result: Result) -> None:
    """Print one JSON line on stdout (run_all.py reads these)."""
    print(json.dumps(asdict(result)), flush=True)


def log(message: str) -> None:
    """Progress goes to stderr so stdout stays JSON lines."""
    print(message, file=sys.stderr, flush=True)
