"""DSPy's per-call overhead on a one-step QA program (run in the DSPy venv).

    $VENV/bin/python bench/overhead/run_dspy.py --base-url http://127.0.0.1:8931

Caches off: ``dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)``
and ``dspy.LM(..., cache=False)``. Sequential: ``program(question=q)`` in a loop. Batch:
``program.batch(examples, num_threads=K)``. One JSON line per setting on stdout.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before dspy imports litellm

import argparse
from importlib.metadata import version

import dspy
from common import Setting, emit, log, measure, parse_args, questions


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField(desc="A question")
    answer: str = dspy.OutputField(desc="The answer")


def build(base_url: str, engine: str, adapter: str) -> dspy.Module:
    """A configured ``dspy.Predict(QA)`` with every cache off."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    # engine="auto" picks DSPy's native lm15 HTTP client for openai/<model> + api_base;
    # "litellm" forces the LiteLLM compatibility engine.
    lm = dspy.LM("openai/fake", api_base=f"{base_url}/v1", api_key="fake", cache=False, engine=engine)
    chosen = dspy.JSONAdapter() if adapter == "json" else dspy.ChatAdapter()
    dspy.configure(lm=lm, adapter=chosen)
    return dspy.Predict(QA)


def sequential(program: dspy.Module, items: list[str]) -> int:
    return sum(program(question=q).answer is not None for q in items)


def batch(program: dspy.Module, items: list[str], threads: int) -> int:
    examples = [dspy.Example(question=q).with_inputs("question") for q in items]
    outputs = program.batch(examples, num_threads=threads, disable_progress_bar=True)
    return sum(o is not None and o.answer is not None for o in outputs)


def main(args: argparse.Namespace) -> None:
    program = build(args.base_url, args.engine, args.adapter)
    items = questions(args.n)
    sequential(program, ["warm-up 1", "warm-up 2"])
    notes = f"engine={args.engine}, adapter={args.adapter}"
    for name in args.settings.split(","):
        concurrency = 1 if name == "sequential" else args.batch_size
        spec = Setting("dspy", version("dspy"), name, concurrency, args.n, args.base_url, args.repeat, notes)
        log(f"[dspy] {name} x{args.n} (concurrency {concurrency})")
        if name == "sequential":
            emit(measure(spec, lambda: sequential(program, items)))
        else:
            emit(measure(spec, lambda: batch(program, items, args.batch_size)))


if __name__ == "__main__":
    import sys

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--engine", default="auto", choices=["auto", "litellm", "lm15"])
    extra.add_argument("--adapter", default="chat", choices=["chat", "json"])
    known, rest = extra.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    parsed = parse_args(__doc__.splitlines()[0])
    parsed.engine, parsed.adapter = known.engine, known.adapter
    main(parsed)
