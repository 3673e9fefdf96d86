"""Scaling of evaluate() over Ray workers against a model server with a fixed latency.

A fake OpenAI-compatible server (its own process, 127.0.0.1) answers every chat completion after
``--latency-ms`` (default 200 ms), any number at once. The program is one Generator whose model
allows ``--concurrency`` (4) requests in flight. ``evaluate()`` runs ``--examples`` (400) distinct
questions, response cache off:

- in-process: the default executor (the model's 4 in flight are the limit);
- Ray with 1, 2, 4, 8 workers, 4 in flight each (one Ray head for all, started and stopped here).

Each setting runs once after a warm-up (workers started, program built: not timed).
Throughput = examples / wall time; efficiency = throughput / (workers x 1-worker throughput).

``--overhead``: the same with an instant server (latency 0), concurrency 1, 1 worker vs
in-process, to give Ray's per-rollout cost: (Ray wall - in-process wall) / examples. Also
pipelined (2 workers x 4 in flight vs in-process 8 in flight).

Run: flock /tmp/promptgym-llm.lock .venv/bin/python bench/distributed/scaling.py
     flock /tmp/promptgym-llm.lock .venv/bin/python bench/distributed/scaling.py --overhead
Writes bench/results/distributed_scaling.json (or distributed_overhead.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.distributed.local_head import LocalRayHead, free_port
from promptgym.distributed.ray_executor import RayExecutor
from promptgym.rollouts.executor import InProcessExecutor

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


def start_server(latency_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_openai_server.py"), "--port", str(port),
                               "--latency-ms", str(latency_ms)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1).read()
            return server, url
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("the fake server did not start")


def build_program(url: str, concurrency: int) -> pg.Program:
    lm = pg.LanguageModel(model="openai/fake", api_base=f"{url}/v1", api_key="unused", cache=False,
                          concurrency=concurrency, max_tokens=16)
    generator = pg.Generator(data_model=Answer, language_model=lm, name="answerer")
    program = pg.Sequential([pg.Input(data_model=Question), generator], name="bench")
    program.compile(reward="exactmatch")
    return program


def examples(count: int, tag: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([Question(question=f"question {tag}-{i}") for i in range(count)], dtype=object)
    y = np.array([Answer(answer="x") for _ in range(count)], dtype=object)
    return x, y


async def timed_evaluate(program: pg.Program, count: int, executor: Any, tag: str) -> dict[str, Any]:
    warm_x, warm_y = examples(16, f"warm-{tag}")
    started = time.perf_counter()
    await program.evaluate(warm_x, warm_y, batch_size=len(warm_x), verbose=0, executor=executor)
    warm_up = time.perf_counter() - started  # with Ray: connect, start the workers, build the program there
    x, y = examples(count, tag)
    started, cpu = time.perf_counter(), time.process_time()
    logs = await program.evaluate(x, y, batch_size=count, verbose=0, executor=executor)
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 3), "examples_per_s": round(count / wall, 2), "reward": float(logs["reward"]),
            "driver_cpu_s": round(time.process_time() - cpu, 3), "warm_up_s": round(warm_up, 2)}


async def measure(args: argparse.Namespace, url: str, head: LocalRayHead) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    program = build_program(url, args.in_process_concurrency or args.concurrency)
    row = await timed_evaluate(program, args.examples, InProcessExecutor(), "inproc")
    rows.append({"setting": "in-process", "workers": 0, "in_flight": program.modules[-1].language_model.concurrency, **row})
    print(rows[-1], flush=True)
    for workers in args.workers:
        program = build_program(url, args.concurrency)
        executor = RayExecutor(address=head.gcs_address, num_workers=workers, concurrency=args.concurrency)
        try:
            row = await timed_evaluate(program, args.examples, executor, f"ray{workers}")
        finally:
            await executor.close()
        rows.append({"setting": f"ray x{workers}", "workers": workers, "in_flight": workers * args.concurrency, **row})
        print(rows[-1], flush=True)
    base = next((r["examples_per_s"] for r in rows if r["workers"] == 1), None)
    for row in rows:
        if base and row["workers"]:
            row["efficiency"] = round(row["examples_per_s"] / (row["workers"] * base), 3)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight per worker")
    parser.add_argument("--in-process-concurrency", type=int, default=None, help="default: --concurrency")
    parser.add_argument("--workers", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--overhead", action="store_true", help="instant server: Ray's per-rollout cost")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.overhead:
        args.latency_ms = 0.0
    server, url = start_server(args.latency_ms)
    started = time.perf_counter()
    head = LocalRayHead(num_cpus=max(args.workers)).start()
    head_start_s = round(time.perf_counter() - started, 2)
    try:
        if args.overhead:
            rows = []
            for concurrency, workers in ((1, [1]), (4, [2])):
                args.concurrency, args.workers = concurrency, workers
                args.in_process_concurrency = concurrency * workers[0]
                found = asyncio.run(measure(args, url, head))
                inproc, ray_row = found[0], found[1]
                ray_row["overhead_ms_per_rollout"] = round((ray_row["wall_s"] - inproc["wall_s"]) / args.examples * 1000, 3)
                rows += found
        else:
            rows = asyncio.run(measure(args, url, head))
    finally:
        head.stop()
        server.kill()
        server.wait()
    result = {"bench": "distributed_overhead" if args.overhead else "distributed_scaling", "examples": args.examples,
              "latency_ms": args.latency_ms, "cpus": os.cpu_count(), "python": platform.python_version(),
              "head_start_s": head_start_s, "load_average": os.getloadavg(), "rows": rows}
    out = args.out or RESULTS / f"{result['bench']}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
