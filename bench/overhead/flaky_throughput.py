"""predict() throughput against a fake OpenAI-compatible server that fails 0% and 33% of requests.

    .venv/bin/python bench/overhead/flaky_throughput.py                 # N=600, batch_size=32, best of 3
    .venv/bin/python bench/overhead/flaky_throughput.py --n 300 --repeat 1 --json bench/results/flaky.json

The server (``bench/fake_openai_server.py --fail-every 3``, in its own process on 127.0.0.1,
Nagle off) answers at once; every third chat request gets a 500, retries included. The client
is the default ``LanguageModel`` (concurrency 8, 3 retries, 0.5 s first backoff), cache off.
Reported per failure rate: predictions/s, wall time, wire requests, failed predictions.
A request that fails waits 0.5 s before its retry, so with failures the time is bounded by
how many examples (the window) and requests (the model's concurrency) stay busy while others
wait out a backoff.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

import promptgym as pg
from promptgym.core.local_server import free_port

HERE = Path(__file__).resolve().parent


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")



def start_server(fail_every: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(HERE.parent / "fake_openai_server.py"), "--port", str(port),
                                "--fail-every", str(fail_every)], stdout=subprocess.PIPE, text=True)
    process.stdout.readline()  # "fake OpenAI server on ..." once it listens
    return process, f"http://127.0.0.1:{port}"


def stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/stats") as response:
        return json.loads(response.read())


async def measure(url: str, n: int, batch_size: int, offset: int) -> dict[str, float]:
    lm = pg.LanguageModel(model="openai/fake", api_base=f"{url}/v1", cache=False)
    program = pg.Sequential([pg.Input(data_model=Question), pg.Generator(data_model=Answer, language_model=lm)], name="qa")
    await program.predict(np.array([Question(question="warm-up")], dtype=object), verbose=0)
    x = np.array([Question(question=f"What is {offset + i} plus one?") for i in range(n)], dtype=object)
    before = stats(url)
    started = time.perf_counter()
    predictions = await program.predict(x, batch_size=batch_size, verbose=0)
    wall = time.perf_counter() - started
    after = stats(url)
    return {"wall_s": round(wall, 3), "predictions_per_s": round(n / wall, 1),
            "wire_requests": after.get("chat_completions", 0) - before.get("chat_completions", 0),
            "injected_failures": after.get("chat_failures", 0) - before.get("chat_failures", 0),
            "failed_predictions": len(predictions.failures)}


def hold_slot_in_backoff() -> None:
    """Make every retry loop keep its slot through the backoff sleeps, as the clients did before core/retry.py."""
    import promptgym.core.retry as retry
    import promptgym.lm.openai_engine as backend

    plain = retry.retrying

    async def holding(attempt, policy, slot=None):  # type: ignore[no-untyped-def]
        if slot is None:
            return await plain(attempt, policy)
        async with slot:
            return await plain(attempt, policy)

    backend.retrying = holding  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting; the fastest is kept")
    parser.add_argument("--label", default="")
    parser.add_argument("--hold-slot-in-backoff", action="store_true",
                        help="keep the concurrency slot while waiting to retry (the behaviour before core/retry.py), "
                             "to measure what releasing it gains")
    parser.add_argument("--json", help="append the rows here as JSON lines")
    args = parser.parse_args()
    if args.hold_slot_in_backoff:
        hold_slot_in_backoff()
    rows = []
    for fail_every, rate in ((0, "0%"), (3, "33%")):
        server, url = start_server(fail_every)
        try:
            runs = [asyncio.run(measure(url, args.n, args.batch_size, offset=repeat * args.n)) for repeat in range(args.repeat)]
        finally:
            server.terminate()
            server.wait()
        best = max(runs, key=lambda run: run["predictions_per_s"])
        row = {"label": args.label, "failure_rate": rate, "n": args.n, "batch_size": args.batch_size, **best,
               "load_avg_1m": round(os.getloadavg()[0], 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
