"""Per-request cost of the HTTP clients promptgym could use, on the instant fake OpenAI server.

    .venv/bin/python bench/overhead/http_clients.py [--n 1000] [--repeat 5] [--out bench/results/http_clients.json]

The same chat request (the one benchmark B's frameworks send, JSON in and out) N times,
sequentially and at concurrency 32, through: http.client in threads (the floor),
``promptgym.lm.http_client.ConnectionPool`` (our own keep-alive HTTP/1.1 client), one
``aiohttp.ClientSession`` and one ``httpx.AsyncClient``. Best of ``--repeat`` runs of
wall and CPU time per request (noise on a shared machine only adds time); the clients
take turns within each repeat, so load drifts hit them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import _raw_request, _stdlib_calls  # noqa: E402
from fake_openai_server import start_fake_server  # noqa: E402

PATH = "/v1/chat/completions"


async def _gather(calls: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def gated(i: int) -> None:
        async with gate:
            await one(i)

    if concurrency == 1:
        for i in range(calls):
            await one(i)
    else:
        await asyncio.gather(*(gated(i) for i in range(calls)))


async def pool_calls(base_url: str, calls: int, concurrency: int) -> None:
    # deferred: an optional client (removed in the branch that settles on one)
    from promptgym.lm.http_client import ConnectionPool

    host, port = base_url.split("//")[1].split(":")
    pool = ConnectionPool(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json"}

    async def one(i: int) -> None:
        reply = await pool.request("POST", PATH, json.dumps(_raw_request(i)).encode(), headers)
        json.loads(reply.body)

    await _gather(calls, concurrency, one)
    await pool.close()


async def aiohttp_calls(base_url: str, calls: int, concurrency: int) -> None:
    import aiohttp  # deferred: optional here

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as session:

        async def one(i: int) -> None:
            async with session.post(base_url + PATH, data=json.dumps(_raw_request(i)).encode(),
                                    headers={"Content-Type": "application/json"}) as response:
                json.loads(await response.read())

        await _gather(calls, concurrency, one)


async def httpx_calls(base_url: str, calls: int, concurrency: int) -> None:
    import httpx  # deferred: optional here

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def one(i: int) -> None:
            response = await client.post(base_url + PATH, content=json.dumps(_raw_request(i)).encode(),
                                         headers={"Content-Type": "application/json"})
            json.loads(response.content)

        await _gather(calls, concurrency, one)


CLIENTS: dict[str, Callable[[str, int, int], Awaitable[None]]] = {
    "pool": pool_calls, "aiohttp": aiohttp_calls, "httpx": httpx_calls}


def timed(work: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clients", default="stdlib,pool,aiohttp,httpx")
    parser.add_argument("--out", type=Path, default=HERE.parent / "results" / "http_clients.json")
    args = parser.parse_args()
    names = args.clients.split(",")
    best: dict[tuple[str, int], tuple[float, float]] = {}
    with start_fake_server() as server:
        for concurrency in (1, 32):
            for round_ in range(args.repeat + 1):  # round 0 warms up (imports, connections) and is not kept
                for name in names:
                    if name == "stdlib":
                        spent = timed(lambda: _stdlib_calls(server.url, args.n, concurrency))
                    else:
                        spent = timed(lambda: asyncio.run(CLIENTS[name](server.url, args.n, concurrency)))
                    if round_:
                        old = best.get((name, concurrency), (float("inf"), float("inf")))
                        best[(name, concurrency)] = (min(old[0], spent[0]), min(old[1], spent[1]))
    rows = [{"client": name, "concurrency": concurrency, "wall_ms_per_call": round(wall / args.n * 1000, 4),
             "cpu_ms_per_call": round(cpu / args.n * 1000, 4)} for (name, concurrency), (wall, cpu) in best.items()]
    print("| client | concurrency | wall ms/call | CPU ms/call |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['client']} | {row['concurrency']} | {row['wall_ms_per_call']:.3f} | {row['cpu_ms_per_call']:.3f} |")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count(), "n": args.n, "repeat": args.repeat,
            "load_avg_1m_end": round(os.getloadavg()[0], 2)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
