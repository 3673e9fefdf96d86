"""A load client for the serving benchmark (stdlib only, so it runs in any venv, in its own process).

    python bench/serving/load.py --url http://127.0.0.1:8000 --path /v1/programs/qa/predict \
        --n 1000 --concurrency 32 --out load.json

Request i sends ``{"question": "q<i>"}`` (``--body`` changes the field) with ``X-Request-Id: r<i>``
over one keep-alive connection per worker thread, and records its status, latency and whether the
answer carried its own id back. A connection the server closed or refused (during a shutdown)
is recorded as status 0 with the error: such a request was never accepted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def run(url: str, path: str, n: int, concurrency: int, field: str, headers: dict[str, str],
        stop_after_refusals: int = 50, prefix: str = "r") -> list[dict[str, Any]]:
    parts = urllib.parse.urlsplit(url)
    results: list[dict[str, Any]] = [{} for _ in range(n)]

    def worker(indices: range) -> None:
        connection: http.client.HTTPConnection | None = None
        refusals = 0
        for i in indices:
            body = json.dumps({field: f"q{i}"})
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
                connection.request("POST", path, body, {"Content-Type": "application/json",
                                                        "X-Request-Id": f"{prefix}{i}", **headers})
                response = connection.getresponse()
                payload = response.read()
                results[i] = {"i": i, "status": response.status, "ms": (time.perf_counter() - started) * 1000,
                              "id_ok": response.getheader("x-request-id") in (f"{prefix}{i}", None),
                              "echo": response.getheader("x-request-id"), "bytes": len(payload)}
                if response.getheader("connection", "").lower() == "close":
                    connection.close()
                    connection = None
            except (OSError, http.client.HTTPException) as error:
                results[i] = {"i": i, "status": 0, "ms": (time.perf_counter() - started) * 1000,
                              "error": f"{type(error).__name__}: {error}"}
                if connection is not None:
                    connection.close()
                connection = None
                refusals += 1
                if refusals >= stop_after_refusals:  # the server is gone: record the rest as not sent
                    for rest in indices[indices.index(i) + 1:]:
                        results[rest] = {"i": rest, "status": 0, "ms": 0.0, "error": "not sent: server gone"}
                    return
        if connection is not None:
            connection.close()

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, [range(j, n, concurrency) for j in range(concurrency)]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--field", default="question")
    parser.add_argument("--header", action="append", default=[], help="NAME:VALUE (repeatable)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    headers = dict(item.split(":", 1) for item in args.header)
    if args.warmup:
        run(args.url, args.path, args.warmup, min(args.concurrency, args.warmup), args.field, headers, prefix="w")
    started = time.perf_counter()
    results = run(args.url, args.path, args.n, args.concurrency, args.field, headers)
    wall = time.perf_counter() - started
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({"wall_s": wall, "results": results}, handle)


if __name__ == "__main__":
    main()
