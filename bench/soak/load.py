"""A load client that runs for a time, not a count (stdlib only; its own process, so the server's RSS is its own).

    python bench/soak/load.py --url http://127.0.0.1:8000 --path /v1/programs/qa/predict \
        --seconds 300 --concurrency 32 --out soak_load.jsonl

Each of ``--concurrency`` threads keeps one keep-alive connection and sends requests back to back
until the time is up; request i asks ``{"question": "q<i>"}``, so no two requests are alike and any
cache that grows with traffic shows in the server's memory. One JSON line per request: its start
(seconds since the load began), status (0: the connection failed, with the error), and latency.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO


def worker(url: str, path: str, deadline: float, started: float, counter: "itertools.count[int]",
           out: TextIO, lock: threading.Lock, headers: dict[str, str]) -> None:
    parts = urllib.parse.urlsplit(url)
    connection: http.client.HTTPConnection | None = None
    while time.perf_counter() < deadline:
        i = next(counter)
        body = json.dumps({"question": f"q{i} what is {i % 97} plus {i % 89}?"})
        sent = time.perf_counter()
        row: dict[str, Any] = {"i": i, "t": round(sent - started, 3)}
        try:
            if connection is None:
                connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
            connection.request("POST", path, body, {"Content-Type": "application/json", **headers})
            response = connection.getresponse()
            payload = response.read()
            row.update(status=response.status, ms=round((time.perf_counter() - sent) * 1000, 3))
            if response.status >= 300:
                row["body"] = payload[:1000].decode("utf-8", "replace")  # enough for the whole reason
            if response.getheader("connection", "").lower() == "close":
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException) as error:
            row.update(status=0, ms=round((time.perf_counter() - sent) * 1000, 3),
                       error=f"{type(error).__name__}: {error}")
            if connection is not None:
                connection.close()
            connection = None
            time.sleep(0.05)
        with lock:
            out.write(json.dumps(row) + "\n")
    if connection is not None:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--header", action="append", default=[], help="NAME:VALUE (repeatable)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    headers = dict(item.split(":", 1) for item in args.header)
    counter, lock = itertools.count(), threading.Lock()
    started = time.perf_counter()
    with open(args.out, "w", encoding="utf-8") as out, ThreadPoolExecutor(args.concurrency) as pool:
        for _ in range(args.concurrency):
            pool.submit(worker, args.url, args.path, started + args.seconds, started, counter, out, lock, headers)


if __name__ == "__main__":
    main()
