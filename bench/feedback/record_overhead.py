"""What ``serve --record`` costs a caller, and whether it loses a trace: the same load with and without it.

    .venv/bin/python bench/feedback/record_overhead.py --n 1000 --rounds 3 --concurrency 1,32

``promptgym serve`` runs the one-step QA program of bench/serving on the fake OpenAI server (its own
process, ``--latency-ms`` per answer); the load client sends ``--n`` requests at each concurrency. The two
arms alternate for ``--rounds`` rounds (off, on, off, on, ...) so drift on a shared machine falls on
both. Reported per arm and concurrency: p50/p99 of every round and the median p50 over rounds; the
target is a difference under 1 ms. At concurrency 32 on a 2-core machine the server is CPU-bound, so
any CPU a request adds shows in its wait; compare rounds run on a quiet machine. With ``--record``, every 200 answer must have left its trace (answers counted
against traces stored), and a SIGTERM after a third of the load must leave a trace for every request
the server answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1]
REPO = BENCH.parent
sys.path.insert(0, str(BENCH / "serving"))
sys.path.insert(0, str(BENCH / "soak"))
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from run_all import free_port, load, percentile, run_load, start_serve, stop, wait_until_up  # noqa: E402
from run import save_program  # noqa: E402  (bench/soak/run.py: the QA program on the fake server)

from promptgym.traces import TraceStore  # noqa: E402

PY = sys.executable
PATH = "/v1/programs/qa/predict"


def one_round(program: Path, folder: Path, record: bool, n: int, concurrency: int, tag: str) -> dict[str, Any]:
    port = free_port()
    store = folder / f"traces-{tag}"
    server = start_serve(program, port, folder / f"serve-{tag}.log", ["--record", str(store)] if record else [])
    try:
        report = run_load(port, PATH, n, concurrency, folder / f"load-{tag}.json")
    finally:
        stop(server)
    results = report["results"]
    ok = [row["ms"] for row in results if row.get("status") == 200]
    row = {"record": record, "n": n, "ok": len(ok), "p50_ms": round(statistics.median(ok), 3),
           "p99_ms": round(percentile(ok, 99), 3)}
    if record:
        stored = TraceStore(store / "traces.db").count()
        warmup = 20  # the load client's warm-up requests are answered (and recorded) too
        row.update(traces=stored, traces_lost=len(ok) + warmup - stored)
    return row


def sigterm_round(program: Path, folder: Path, n: int) -> dict[str, Any]:
    """SIGTERM once a third of the requests are answered: every request answered 200 must have its trace."""
    port = free_port()
    log, store, out = folder / "sigterm.log", folder / "traces-sigterm", folder / "sigterm-load.json"
    server = start_serve(program, port, log, ["--record", str(store)])
    client = load(port, PATH, n, 32, out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and log.read_text().count(" 200 ") < n // 3 + 20:
        time.sleep(0.005)
    os.kill(server.pid, signal.SIGTERM)
    exit_status = server.wait(timeout=60)
    client.wait(timeout=120)
    results = json.loads(out.read_text())["results"]
    answered = sum(1 for row in results if row.get("status") == 200) + 20
    stored = TraceStore(store / "traces.db").count()
    return {"n": n, "server_exit": exit_status, "answered_200_with_warmup": answered, "traces": stored,
            "traces_lost": max(0, answered - stored), "tracebacks_in_log": log.read_text().count("Traceback")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,32", help="comma-separated concurrencies")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "record_overhead.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="record-") as scratch:
        folder = Path(scratch)
        fake_port = free_port()
        fake = subprocess.Popen([PY, str(BENCH / "fake_openai_server.py"), "--port", str(fake_port),
                                 "--latency-ms", str(args.latency_ms)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_until_up(f"http://127.0.0.1:{fake_port}/v1/models")
            program = folder / "qa.json"
            asyncio.run(save_program("fake", f"http://127.0.0.1:{fake_port}", program))
            levels = [int(level) for level in args.concurrency.split(",")]
            rounds = [{"concurrency": level, **one_round(program, folder, record, args.n, level,
                                                          f"{level}-{number}-{int(record)}")}
                      for level in levels for number in range(args.rounds) for record in (False, True)]
            sigterm = sigterm_round(program, folder, args.n)
        finally:
            fake.terminate()
            fake.wait(timeout=30)
    by_level = {}
    for level in levels:
        off = statistics.median(row["p50_ms"] for row in rounds if row["concurrency"] == level and not row["record"])
        on = statistics.median(row["p50_ms"] for row in rounds if row["concurrency"] == level and row["record"])
        by_level[str(level)] = {"p50_ms_without": off, "p50_ms_with": on, "p50_difference_ms": round(on - off, 3)}
    report = {"command": " ".join(["bench/feedback/record_overhead.py", *sys.argv[1:]]), "rounds": rounds,
              "by_concurrency": by_level, "traces_lost": sum(row.get("traces_lost", 0) for row in rounds),
              "sigterm": sigterm}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
