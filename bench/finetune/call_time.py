"""What a user pays on every call: seconds and tokens per test call of each row's program, timed side by side.

``run.py`` trains for hours, and a machine shared now and then makes its per-row timings unequal. This
loads the programs it saved (``<--work>/<task>/<row>.program.json``; the untrained program is rebuilt),
turns their response caches off, and answers the first ``--n`` test items one call at a time, rotating the
order of the rows on every item, so that whatever else the machine does falls on every row alike. It
reports each row's mean seconds and tokens per call and its ratio to the untrained program, with a 95%
bootstrap interval over the items (issue 42's target: within 1.2x).

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/finetune/call_time.py --work /tmp/ft42/work \\
        --tasks dates_dmy --n 50 --out bench/results/finetune_call_time.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.lm.usage import LEDGER

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as finetune_bench  # noqa: E402


def uncached(program: pg.Program) -> pg.Program:
    """The program with every model's response cache off: each call is computed, as a new user's would be."""
    for module in program.modules:
        model = getattr(module, "language_model", None)
        if model is not None:
            model.cache = False
    return program


def ratio_interval(numerator: np.ndarray, denominator: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """mean(numerator) / mean(denominator) over paired items, with a 95% bootstrap interval.

    >>> ratio_interval(np.array([2.0, 2.0, 2.0]), np.array([1.0, 1.0, 1.0]))
    (2.0, 2.0, 2.0)
    """
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(numerator), size=(2000, len(numerator)))
    ratios = numerator[draws].mean(axis=1) / denominator[draws].mean(axis=1)
    return (float(numerator.mean() / denominator.mean()), float(np.quantile(ratios, 0.025)),
            float(np.quantile(ratios, 0.975)))


async def time_task(task: str, rows: list[str], args: argparse.Namespace) -> dict[str, Any]:
    (x, y), _, (x_test, _) = finetune_bench.split(task, args.n_train, args.n_val, args.n_test, args.seed)
    programs: dict[str, pg.Program] = {}
    for row in rows:
        saved = Path(args.work) / task / f"{row}.program.json"
        if row == "untrained":
            programs[row] = uncached(await finetune_bench.build(task, x, y))
        elif saved.exists():
            programs[row] = uncached(pg.Program.load(str(saved)))
        else:
            print(f"{task} / {row}: no saved program at {saved}: left out", file=sys.stderr)
    names = list(programs)
    for name in names:  # the first call loads the model: not a call a serving user waits for
        await programs[name](x_test[0])
    seconds = {name: [] for name in names}
    tokens = {name: [] for name in names}
    for item in range(1, args.n + 1):
        for name in names[item % len(names):] + names[:item % len(names)]:
            usage, started = LEDGER.snapshot(), time.perf_counter()
            await programs[name](x_test[item])
            seconds[name].append(time.perf_counter() - started)
            spent = LEDGER.since(usage).values()
            tokens[name].append(sum(u.prompt_tokens + u.completion_tokens for u in spent))
    base = np.array(seconds["untrained"]) if "untrained" in seconds else None
    result: dict[str, Any] = {"task": task, "n": args.n, "rows": {}}
    for name in names:
        row: dict[str, Any] = {"seconds_per_call": round(float(np.mean(seconds[name])), 3),
                               "tokens_per_call": round(float(np.mean(tokens[name])), 1)}
        if base is not None and name != "untrained":
            mean, low, high = ratio_interval(np.array(seconds[name]), base)
            row["vs_untrained"] = {"ratio": round(mean, 3), "low": round(low, 3), "high": round(high, 3)}
        result["rows"][name] = row
        print(f"{task} / {name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="run.py's --work folder")
    parser.add_argument("--tasks", default=",".join(finetune_bench.TASKS))
    parser.add_argument("--rows", default="untrained,prompt,ft_labels,sequence")
    parser.add_argument("--n", type=int, default=50, help="test items timed per row")
    parser.add_argument("--n-train", type=int, default=60)
    parser.add_argument("--n-val", type=int, default=40)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = [await time_task(task, args.rows.split(","), args) for task in args.tasks.split(",")]
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
