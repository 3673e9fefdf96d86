"""synalinks' per-call overhead on a one-step QA program (run in the synalinks venv).

    $VENV/bin/python bench/overhead/run_synalinks.py --base-url http://127.0.0.1:8931

Caches off: ``LanguageModel(caching=False, cache_dir=None)`` (litellm's cache and
synalinks' file cache; both are off by default too). Sequential: ``await program(x)``
in a loop. Batch: ``await program.predict(x, batch_size=K)``. One JSON line per setting.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before synalinks imports litellm
os.environ.setdefault("OPENAI_API_KEY", "fake")  # litellm's openai/ route wants a key

import argparse
import asyncio
import sys
from importlib.metadata import version

import numpy as np
import synalinks
from common import Setting, emit, log, measure_async, parse_args, questions


class Question(synalinks.DataModel):
    question: str = synalinks.Field(description="A question")


class Answer(synalinks.DataModel):
    answer: str = synalinks.Field(description="The answer")


async def build(base_url: str, model: str) -> synalinks.Program:
    """The functional one-Generator program, caches off."""
    lm = synalinks.LanguageModel(model=model, api_base=f"{base_url}/v1", caching=False, cache_dir=None)
    inputs = synalinks.Input(data_model=Question)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm)(inputs)
    return synalinks.Program(inputs=inputs, outputs=outputs, name="qa")


async def sequential(program: synalinks.Program, items: list[str]) -> int:
    ok = 0
    for q in items:
        ok += (await program(Question(question=q))) is not None
    return ok


async def batch(program: synalinks.Program, items: list[str], batch_size: int) -> int:
    x = np.array([Question(question=q) for q in items], dtype=object)
    predictions = await program.predict(x, batch_size=batch_size, verbose=0)
    return sum(p is not None for p in predictions)


async def main(args: argparse.Namespace) -> None:
    program = await build(args.base_url, args.model)
    items = questions(args.n)
    await sequential(program, ["warm-up 1", "warm-up 2"])
    notes = f"model={args.model} (litellm)"
    for name in args.settings.split(","):
        concurrency = 1 if name == "sequential" else args.batch_size
        spec = Setting("synalinks", version("synalinks"), name, concurrency, args.n, args.base_url, args.repeat, notes)
        log(f"[synalinks] {name} x{args.n} (concurrency {concurrency})")
        if name == "sequential":
            emit(await measure_async(spec, lambda: sequential(program, items)))
        else:
            emit(await measure_async(spec, lambda: batch(program, items, args.batch_size)))


if __name__ == "__main__":
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--model", default="openai/fake", help="openai/fake or hosted_vllm/fake")
    known, rest = extra.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    parsed = parse_args(__doc__.splitlines()[0])
    parsed.model = known.model
    asyncio.run(main(parsed))
