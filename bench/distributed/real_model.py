"""The embedded model on Ray vs in-process: 2 actors x 1 llama.cpp thread against 1 process x 2 threads.

``evaluate()`` of the dates task's 100 test sentences (Qwen2.5-Coder-0.5B, zero-shot, JSON schema,
temperature 0, response cache off), on this 2-core machine:

- in-process: one llama.cpp context with 2 threads (the default: every core);
- Ray: 2 workers, each its own context with 1 thread (one Ray head, started and stopped here).

Each side warms up first (model loaded, not timed). Scores must be equal; the wall times say
whether two single-thread contexts keep up with one two-thread context.

Run: flock /tmp/promptgym-llm.lock .venv/bin/python bench/distributed/real_model.py
Writes bench/results/distributed_real_model.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import promptgym as pg
from promptgym.datasets import dates
from promptgym.distributed.local_head import LocalRayHead
from promptgym.distributed.ray_executor import RayExecutor
from promptgym.lm.local_models import DEFAULT_LOCAL_MODEL
from promptgym.rollouts.executor import InProcessExecutor

ROOT = Path(__file__).resolve().parents[2]


def build_program() -> pg.Program:
    lm = pg.LanguageModel(model=f"local/{DEFAULT_LOCAL_MODEL}", max_tokens=48, cache=False)
    generator = pg.Generator(data_model=dates.Date, language_model=lm, max_string_length=40, name="reader")
    program = pg.Sequential([pg.Input(data_model=dates.Text), generator], name="date_reader")
    program.compile(reward="exactmatch")
    return program


async def timed(executor: Any, x: Any, y: Any, warm: tuple[Any, Any]) -> dict[str, Any]:
    program = build_program()
    started = time.perf_counter()
    await program.evaluate(warm[0], warm[1], batch_size=len(warm[0]), verbose=0, executor=executor)
    warm_up = time.perf_counter() - started  # loads the model (in each worker, with Ray)
    started = time.perf_counter()
    logs = await program.evaluate(x, y, batch_size=len(x), verbose=0, executor=executor)
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 2), "s_per_example": round(wall / len(x), 3), "reward": round(float(logs["reward"]), 4),
            "warm_up_s": round(warm_up, 2)}


async def main(count: int) -> dict[str, Any]:
    (x_train, y_train), (x_test, y_test) = dates.load_data(n_train=4, n_test=count, seed=0)
    warm = (x_train[:4], y_train[:4])
    rows = [{"setting": "in-process, 1 context x 2 threads", **await timed(InProcessExecutor(), x_test, y_test, warm)}]
    print(rows[-1], flush=True)
    head = LocalRayHead(num_cpus=2, dashboard=False).start()
    executor = RayExecutor(address=head.gcs_address, num_workers=2, threads=1)
    try:
        rows.append({"setting": "Ray, 2 workers x 1 thread", **await timed(executor, x_test, y_test, warm)})
    finally:
        await executor.close()
        head.stop()
    print(rows[-1], flush=True)
    rows[1]["speed_vs_in_process"] = round(rows[0]["wall_s"] / rows[1]["wall_s"], 3)
    return {"bench": "distributed_real_model", "model": DEFAULT_LOCAL_MODEL, "examples": count, "cpus": os.cpu_count(),
            "load_average": os.getloadavg(), "rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100)
    args = parser.parse_args()
    result = asyncio.run(main(args.examples))
    (ROOT / "bench" / "results" / "distributed_real_model.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
