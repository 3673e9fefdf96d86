"""Concurrent calls on the embedded engine: the wall time of a batch of calls made at once.

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/embedded/concurrent_calls.py --calls 12 --rounds 3 \
        --out bench/results/embedded_concurrent_calls.json

One LanguageModel on ``--model`` (no cache, temperature 0, distinct prompts), a warm-up call, then
``--rounds`` rounds of ``--calls`` calls started together (``asyncio.gather``): llama.cpp runs them one
at a time, so the round's wall time is what the engine's way of taking turns costs. Run it from two
checkouts (``PYTHONPATH=<checkout>``) to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

import promptgym as pg


async def rounds(model: str, calls: int, count: int) -> list[float]:
    lm = pg.LanguageModel(model=model, cache=False, max_tokens=24)
    await lm([{"role": "user", "content": "warm up"}], temperature=0.0)
    seconds = []
    for index in range(count):
        started = time.perf_counter()
        await asyncio.gather(*(lm([{"role": "user", "content": f"One fact about the number {index * 100 + i}."}],
                                  temperature=0.0) for i in range(calls)))
        seconds.append(round(time.perf_counter() - started, 3))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    seconds = asyncio.run(rounds(args.model, args.calls, args.rounds))
    result = {"bench": "embedded_concurrent_calls", "model": args.model, "calls": args.calls, "round_seconds": seconds,
              "median_s": statistics.median(seconds), "code": pg.__file__, "load_average_1min": os.getloadavg()[0]}
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
