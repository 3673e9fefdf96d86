"""Per-call latency of demonstrations retrieved per input vs one fixed set, on the embedded engine.

The local backend keeps the KV cache of the prompt prefix it evaluated last:
with one fixed set of demonstrations, consecutive calls share everything up to
the input, so only the input is evaluated. Retrieved demonstrations change
from one input to the next, and the engine evaluates them again each call.
This measures that cost on the dates_dmy_200 task (bench/training/data), same
inputs, same 3 demonstrations per prompt, temperature 0, response cache off:

  zero_shot     no demonstration
  fixed_3       the first 3 training examples, for every input
  knn_3         the 3 training examples nearest to each input (KNNFewShot's program)

Run: flock /tmp/promptgym-llm.lock .venv/bin/python bench/embedded/retrieval_latency.py [--n 60]
Writes bench/results/embedded_retrieval_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

import promptgym as pg
from promptgym.lm.local_models import DEFAULT_LOCAL_MODEL
from promptgym.modules.retrieval import example_text, retrieval_state
from promptgym.stats import paired_test

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH / "training"))
from run_promptgym import Date, Text  # noqa: E402  (the dates tasks' DataModels)

MODEL = f"local/{DEFAULT_LOCAL_MODEL}"


async def timed_predict(program: pg.Program, xs: list, ys: list) -> dict:
    """Sequential calls (one at a time, as the engine serves them): seconds per call and exact matches."""
    started = time.perf_counter()
    predictions = await program.predict(np.array(xs, dtype=object), batch_size=1, verbose=0)
    seconds = time.perf_counter() - started
    hits = [int(p is not None and p.get("date") == y.date) for p, y in zip(predictions, ys)]
    return {"seconds_per_call": round(seconds / len(xs), 3), "correct": sum(hits), "n": len(xs), "hits": hits}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--task", default="dates_dmy_200")
    args = parser.parse_args()
    task = json.loads((BENCH / "training" / "data" / f"{args.task}.json").read_text())
    train = [({"text": r["text"]}, {"date": r["date"]}) for r in task["train"]]
    xs = [Text(text=r["text"]) for r in task["test"][: args.n]]
    ys = [Date(date=r["date"]) for r in task["test"][: args.n]]
    lm = pg.LanguageModel(model=MODEL, cache=False, max_tokens=32)
    embeddings = pg.EmbeddingModel(model="local/multilingual-e5-small")
    pool = [{"inputs": x, "outputs": y} for x, y in train]
    vectors = await embeddings([example_text(x) for x, _ in train])
    await embeddings([example_text({"text": x.text}) for x in xs])  # the queries, so no row pays for embedding them
    settings = {
        "zero_shot": {"examples": []},
        "fixed_3": {"examples": pool[:3]},
        "knn_3": {"examples": [], "retrieval": retrieval_state(pool, vectors, 3, embeddings)},
    }
    rows = {}
    for name, state in settings.items():
        generator = pg.Generator(data_model=Date, language_model=lm)
        generator.state.assign({**generator.state.get_json(), **state})
        program = pg.Sequential([pg.Input(data_model=Text), generator], name=name)
        await program.predict(np.array(xs[:1], dtype=object), batch_size=1, verbose=0)  # load, warm the prefix
        rows[name] = await timed_predict(program, xs, ys)
        print(name, {key: value for key, value in rows[name].items() if key != "hits"}, flush=True)
    result = {"model": MODEL, "task": args.task, "n": args.n, "rows": rows,
              "knn_over_fixed": round(rows["knn_3"]["seconds_per_call"] / rows["fixed_3"]["seconds_per_call"], 2),
              "knn_vs_fixed": str(paired_test(rows["fixed_3"]["hits"], rows["knn_3"]["hits"]))}
    out = BENCH / "results" / "embedded_retrieval_latency.json"
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
