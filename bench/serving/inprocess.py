"""promptgym in-process: the program called directly, timed per call (promptgym venv, its own process).

    python bench/serving/inprocess.py --program qa.json --n 1000 --concurrency 32 --out inproc.json

``await program(x)`` per request (the floor a server adds to), at the given concurrency; plus
``program.predict(x, batch_size=concurrency)`` over the same inputs for throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from promptgym.programs.program import Program


async def timed_calls(program: Program, n: int, concurrency: int) -> tuple[float, list[dict]]:
    model = program.input_data_model
    gate = asyncio.Semaphore(concurrency)
    results: list[dict] = [{} for _ in range(n)]

    async def one(i: int) -> None:
        async with gate:
            started = time.perf_counter()
            try:
                await program(model(question=f"q{i}"))
                results[i] = {"i": i, "status": 200, "ms": (time.perf_counter() - started) * 1000}
            except Exception as error:  # noqa: BLE001 - counted as a failure
                results[i] = {"i": i, "status": 500, "ms": 0.0, "error": str(error)}

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - started, results


async def main(args: argparse.Namespace) -> None:
    program = Program.load(args.program)
    await timed_calls(program, 20, min(20, args.concurrency))  # warm-up: connections, first-call building
    wall, results = await timed_calls(program, args.n, args.concurrency)
    x = [{"question": f"p{i}"} for i in range(args.n)]
    started = time.perf_counter()
    predictions = await program.predict(x, batch_size=args.concurrency, verbose=0)
    predict_wall = time.perf_counter() - started
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({"wall_s": wall, "results": results, "predict_wall_s": predict_wall,
                   "predict_ok": int(sum(p is not None for p in predictions))}, handle)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--program", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--out", required=True)
    asyncio.run(main(parser.parse_args()))
