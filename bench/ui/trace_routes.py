"""How long the review page's trace routes take on a big trace store (in process, through TestClient).

    .venv/bin/python bench/ui/trace_routes.py --traces 100000 --folder /tmp/ui-bench

The store is filled once (every tenth trace rated, half of those good) and reused; each route
is called 20 times and its median and worst time printed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from fastapi.testclient import TestClient

from promptgym.traces import TraceStore
from promptgym.ui import create_ui_app

CALLS = 20


def fill(store: TraceStore, count: int) -> None:
    rng = random.Random(0)
    for index in range(store.count(), count):
        trace_id = store.record(program="qa", version="v1", inputs={"question": f"question {index} " * 8},
                                outputs={"answer": f"answer {index}"},
                                modules=[{"module": "answerer", "inputs": {"question": f"question {index}"},
                                          "outputs": {"answer": f"answer {index}"}}])
        if index % 10 == 0:
            store.add_feedback(trace_id, rating=float(rng.random() < 0.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/promptgym-ui-bench"))
    arguments = parser.parse_args()
    store = TraceStore(arguments.folder / f"traces-{arguments.traces}.db")
    started = time.perf_counter()
    fill(store, arguments.traces)
    print(f"store: {store.count()} traces ({time.perf_counter() - started:.1f} s to fill)")
    client = TestClient(create_ui_app(None, store), base_url="http://127.0.0.1")
    newest = store.traces(limit=1, newest_first=True)[0].id
    routes = {"newest 100": "/api/traces", "rated good": "/api/traces?rating=good",
              "program and version": "/api/traces?program=qa&version=v1", "one trace": f"/api/traces/{newest}",
              "programs": "/api/traces/programs"}
    for name, path in routes.items():
        times = []
        for _ in range(CALLS):
            start = time.perf_counter()
            answer = client.get(path)
            times.append((time.perf_counter() - start) * 1000)
            assert answer.status_code == 200, answer.text
        print(f"{name:20s} p50 {statistics.median(times):7.1f} ms   max {max(times):7.1f} ms")


if __name__ == "__main__":
    main()
