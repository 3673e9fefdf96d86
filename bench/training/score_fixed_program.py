"""Score one fixed promptgym program (given instructions and demonstrations, no training) on a task's splits.

    .venv/bin/python bench/training/score_fixed_program.py --task dates_iso --splits train,val,test \
        --demos '[{"input": "Tickets go on sale September 11, 2021.", "output": "2021-09-11"}]' \
        --instructions "Read the input text and extract the date in the format 'YYYY-MM-DD'."

Runs the embedded model in-process (``local/qwen2.5-coder-0.5b-instruct``, temperature 0,
``max_tokens=64``, no cache) with the bench's program (one Generator, the task's field
descriptions) and prints each miss and the exact-match count per split. Used to check
what a peer's learned demonstrations are worth in promptgym's prompt, and what an
optimizer could have seen of it on validation. Take ``/tmp/promptgym-llm.lock`` first.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import numpy as np

import promptgym as pg
from common import exact, load_task
from run_promptgym import Text, bench_program


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--splits", default="val,test")
    parser.add_argument("--demos", default="[]", help='JSON list of {"input": text, "output": date}')
    parser.add_argument("--instructions", default=None, help="the Generator's instructions (default: its own)")
    args = parser.parse_args()
    task = load_task(args.task)
    lm = pg.LanguageModel(model="local/qwen2.5-coder-0.5b-instruct", cache=False, temperature=0.0, max_tokens=64)
    program = await bench_program(lm)
    state = program.trainable_variables[0]
    instructions = {"instructions": args.instructions} if args.instructions else {}
    examples = [{"inputs": {"text": d["input"]}, "outputs": {"date": d["output"]}, "reward": 1.0}
                for d in json.loads(args.demos)]
    state.assign({**state.value, **instructions, "examples": examples})
    for split in args.splits.split(","):
        rows = task[split]
        predictions = await program.predict(np.array([Text(text=r["text"]) for r in rows], dtype=object),
                                            batch_size=4, verbose=0)
        hits = 0
        for prediction, row in zip(predictions, rows):
            got = None if prediction is None else prediction.get("date")
            if exact(got, row["date"]):
                hits += 1
            else:
                print(f"  miss {split}: {row['text']!r} -> {got!r}, expected {row['date']!r}")
        print(f"{split}: {hits}/{len(rows)}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
