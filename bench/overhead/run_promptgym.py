"""promptgym's per-call overhead on a one-step QA program (run with the project's .venv).

    .venv/bin/python bench/overhead/run_promptgym.py --base-url http://127.0.0.1:8931

Cache off: ``LanguageModel(..., cache=False)``. Sequential: ``await program(x)`` in a
loop. Batch: ``await program.predict(x, batch_size=K)``. One JSON line per setting.
"""

from __future__ import annotations

import argparse
import asyncio
from importlib.metadata import PackageNotFoundError, version

import numpy as np
from common import Setting, emit, log, measure_async, parse_args, questions

import promptgym as pg


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


async def build(base_url: str) -> pg.Program:
    """The functional one-Generator program, response cache off."""
    lm = pg.LanguageModel(model="openai/fake", api_base=f"{base_url}/v1", cache=False)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm)(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name="qa")


async def sequential(program: pg.Program, items: list[str]) -> int:
    ok = 0
    for q in items:
        ok += (await program(Question(question=q))) is not None
    return ok


async def batch(program: pg.Program, items: list[str], batch_size: int) -> int:
    x = np.array([Question(question=q) for q in items], dtype=object)
    predictions = await program.predict(x, batch_size=batch_size)
    return sum(p is not None for p in predictions)


def _version() -> str:
    try:
        return version("promptgym")
    except PackageNotFoundError:
        return getattr(pg, "__version__", "dev")


async def main(args: argparse.Namespace) -> None:
    program = await build(args.base_url)
    items = questions(args.n)
    await sequential(program, ["warm-up 1", "warm-up 2"])
    for name in args.settings.split(","):
        concurrency = 1 if name == "sequential" else args.batch_size
        spec = Setting("promptgym", _version(), name, concurrency, args.n, args.base_url, args.repeat, "model=openai/fake")
        log(f"[promptgym] {name} x{args.n} (concurrency {concurrency})")
        if name == "sequential":
            emit(await measure_async(spec, lambda: sequential(program, items)))
        else:
            emit(await measure_async(spec, lambda: batch(program, items, args.batch_size)))


if __name__ == "__main__":
    asyncio.run(main(parse_args(__doc__.splitlines()[0])))
