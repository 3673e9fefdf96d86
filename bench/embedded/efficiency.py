"""Embedded efficiency: promptgym's predict() vs calling llama-cpp-python directly.

Same model, same prompts, same JSON-schema grammar, temperature 0, caches off.
Four timings over N inputs:

  raw_zero_shot        llama.create_chat_completion in a loop (the engine alone)
  promptgym_zero_shot  program.predict(x, batch_size=N)
  raw_3shot_no_reuse   3 few-shot examples in the prompt, KV cache reset before every call
  promptgym_3shot      the same prompts through predict() (prefix reuse is automatic)

Run: flock /tmp/promptgym-llm.lock .venv/bin/python bench/embedded/efficiency.py [--n 100]
Writes bench/results/embedded_efficiency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Literal

import numpy as np

import promptgym as pg
from promptgym.lm.local_engine import shared_local_engine
from promptgym.lm.local_models import DEFAULT_LOCAL_MODEL, ensure_local_model

MODEL = f"local/{DEFAULT_LOCAL_MODEL}"
SUBJECTS = ["The movie", "This phone", "Our hotel", "The pizza", "That concert", "My new laptop", "The service",
            "This book", "The coffee", "Their support team"]
VERDICTS = ["was wonderful", "was a waste of money", "exceeded my hopes", "broke on day two", "was pleasant",
            "made me angry", "felt cheap", "is the best I've had", "was slow and rude", "delighted everyone"]


class Review(pg.DataModel):
    text: str = pg.Field(description="A short review")


class Sentiment(pg.DataModel):
    label: Literal["positive", "negative"] = pg.Field(description="Sentiment of the review")


def reviews(n: int) -> list[Review]:
    return [Review(text=f"{SUBJECTS[i % 10]} {VERDICTS[(i * 7 + i // 10) % 10]} (#{i}).") for i in range(n)]


SHOTS = [(Review(text="The food was delicious and fresh."), Sentiment(label="positive")),
         (Review(text="Terrible battery, returned it."), Sentiment(label="negative")),
         (Review(text="Friendly staff and a lovely view."), Sentiment(label="positive"))]


def build(shots: bool) -> tuple[pg.Program, pg.Generator]:
    lm = pg.LanguageModel(model=MODEL, cache=False, max_tokens=16)
    generator = pg.Generator(data_model=Sentiment, language_model=lm, examples=SHOTS if shots else None)
    inputs = pg.Input(data_model=Review)
    return pg.Program(inputs=inputs, outputs=generator.symbolic_call(inputs)), generator


def time_raw(generator: pg.Generator, x: list[Review], reset_each_call: bool) -> float:
    backend = shared_local_engine(ensure_local_model(DEFAULT_LOCAL_MODEL))
    llama = backend._engine()
    grammar = backend._grammar(generator._schema)
    started = time.perf_counter()
    for review in x:
        if reset_each_call:
            llama.reset()
            llama._ctx.kv_cache_clear()
        llama.create_chat_completion(messages=generator.messages(review.get_json()), grammar=grammar,
                                     temperature=0.0, max_tokens=16, seed=0)
    return time.perf_counter() - started


async def time_predict(program: pg.Program, x: list[Review]) -> float:
    started = time.perf_counter()
    predictions = await program.predict(np.array(x, dtype=object), batch_size=len(x), verbose=0)
    elapsed = time.perf_counter() - started
    assert not predictions.failures, predictions.failures
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    x = reviews(args.n)
    zero_program, zero_generator = build(shots=False)
    shot_program, shot_generator = build(shots=True)
    await time_predict(zero_program, x[:2])  # load the model and compile the grammar outside the timings
    results = {
        "n": args.n,
        "raw_zero_shot_s": time_raw(zero_generator, x, reset_each_call=False),
        "promptgym_zero_shot_s": await time_predict(zero_program, x),
        "raw_3shot_no_reuse_s": time_raw(shot_generator, x, reset_each_call=True),
        "raw_3shot_reuse_s": time_raw(shot_generator, x, reset_each_call=False),
        "promptgym_3shot_s": await time_predict(shot_program, x),
    }
    results["overhead_ratio_zero_shot"] = results["promptgym_zero_shot_s"] / results["raw_zero_shot_s"]
    results["overhead_ratio_3shot"] = results["promptgym_3shot_s"] / results["raw_3shot_reuse_s"]
    results["prefix_reuse_speedup"] = results["raw_3shot_no_reuse_s"] / results["promptgym_3shot_s"]
    out = Path(__file__).resolve().parents[1] / "results" / "embedded_efficiency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    for key, value in results.items():
        print(f"{key:28} {value:.3f}" if isinstance(value, float) else f"{key:28} {value}")


if __name__ == "__main__":
    asyncio.run(main())
