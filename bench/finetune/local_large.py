"""FineTune on the ``local-large`` package model (Qwen2.5-Coder-1.5B) on the CPU: step time, peak RSS, and the whole fit.

The rows are mmlu_topics as the program's own chat messages (system prompt, input JSON, label JSON):
about 180 tokens each with the Qwen tokenizer (167-252), most of them the shared system message.

    # a few SFT steps (the engine alone): load time, seconds a step, an evaluation, peak RSS -> extrapolation
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/finetune/local_large.py --steps 4 \\
        --out bench/results/finetune_local_large_steps.json
    # the whole fit: FineTune(n_epochs="auto", max_train_seconds=1200) on 360 rows, then the validation race
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/finetune/local_large.py --fit --max-train-seconds 1200 \\
        --out bench/results/finetune_local_large_fit.json

Needs ``pip install 'promptgym[local-large,sft]'`` (1.1 GB of GGUF parts; the first run dequantises them once
into a 6.7 GB float32 copy under the models dir, about 2 minutes and 9 GB of RSS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import promptgym as pg
from promptgym.finetune import SFTJob, SFTSettings
from promptgym.optimizers.finetune import FineTune

LARGE = "local/qwen2.5-coder-1.5b-instruct"
RESULTS = Path(__file__).resolve().parents[1] / "results"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def program_and_data(n_train: int, n_val: int, seed: int) -> tuple[pg.Program, Any, Any, Any, Any]:
    module = pg.datasets.mmlu_topics
    (x, y), _ = module.load_data(n_train=n_train + n_val, seed=seed)
    inputs = pg.Input(data_model=module.get_input_data_model())
    outputs = await pg.Generator(data_model=module.get_output_data_model(),
                                 language_model=pg.LanguageModel(model=LARGE))(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="mmlu_topics_large")
    return program, x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def chat_rows(program: pg.Program, xs: Any, ys: Any) -> list[dict[str, Any]]:
    generator = program.modules[-1]
    return [{"messages": [*generator.messages(x.model_dump(mode="json"), [], input_schema=x.get_schema()),
                          {"role": "assistant", "content": json.dumps(y.model_dump(mode="json"))}]}
            for x, y in zip(xs, ys)]


def time_steps(args: argparse.Namespace) -> dict[str, Any]:
    """Load the model, run ``--steps`` optimiser steps and one evaluation; extrapolate to ``--n-train`` rows."""
    from promptgym.finetune.sft_run import run_sft

    program, x, y, x_val, y_val = asyncio.run(program_and_data(args.n_train, args.n_val, args.seed))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = chat_rows(program, x, y)
    (work / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (work / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chat_rows(program, x_val, y_val)),
                                           encoding="utf-8")
    started = time.perf_counter()
    settings = SFTSettings(base_model=LARGE, train_file=str(work / "train.jsonl"),
                           validation_file=str(work / "validation.jsonl"), batch_size=args.batch_size,
                           max_steps=args.steps, max_length=1024, seed=0, save_steps=10_000, summary_samples=0,
                           export={"merged": "none", "adapter": True})
    job = SFTJob.prepare(settings, name="local-large-steps")
    loaded_s = time.perf_counter() - started
    rss_loaded = peak_rss_mb()
    steps: list[float] = []
    cpu: list[float] = []
    evals: list[float] = []
    marks = {"eval": time.perf_counter(), "cpu": time.process_time()}

    def record(event: Any) -> None:  # CPU seconds too: other jobs on this shared machine swing the wall time
        now, used = time.perf_counter(), time.process_time()
        if event.kind == "sft_eval" and event["label"] == "before":
            evals.append(now - marks["eval"])
        if event.kind in ("sft_eval", "sft_step") and event.get("label", "step") != "final":
            if event.kind == "sft_step":
                steps.append(float(event["seconds"]))
                cpu.append(used - marks["cpu"])
            marks["cpu"] = used

    # the adapter-only export needs a GGUF base (it has one); train_steps stops at max_steps
    try:
        run_sft(job, work / "run", on_event=record)
    except Exception as error:  # noqa: BLE001 - the export is not what is timed here; say what stopped it
        print(f"after the steps: {type(error).__name__}: {error}", file=sys.stderr)
    lengths = [len(row.input_ids) for row in job.data.train] if job.data else []
    per_epoch = math.ceil(args.n_train / args.batch_size)
    step_s = sum(steps[1:]) / max(len(steps) - 1, 1) if len(steps) > 1 else (steps[0] if steps else float("nan"))
    return {"model": LARGE, "rows": args.n_train, "validation_rows": args.n_val, "batch_size": args.batch_size,
            "mean_tokens": round(sum(lengths) / max(len(lengths), 1), 1) if lengths else None,
            "load_s": round(loaded_s, 1), "step_s": [round(s, 2) for s in steps], "mean_step_s": round(step_s, 2),
            "step_cpu_s": [round(s, 2) for s in cpu], "load_average_1min": round(os.getloadavg()[0], 1),
            "eval_s": round(evals[0], 1) if evals else None, "peak_rss_mb_loaded": round(rss_loaded),
            "peak_rss_mb": round(peak_rss_mb()), "steps_per_epoch": per_epoch,
            "one_epoch_s_extrapolated": round(per_epoch * step_s, 1), "device": job.plan.describe()}


async def fit(args: argparse.Namespace) -> dict[str, Any]:
    """The whole thing: FineTune(n_epochs="auto") in fit(), then the tuned model against the start on validation."""
    program, x, y, x_val, y_val = await program_and_data(args.n_train, args.n_val, args.seed)
    optimizer = FineTune(source="labels", n_epochs="auto", max_train_seconds=args.max_train_seconds,
                         batch_size=args.batch_size, output_dir=str(Path(args.work) / "fit"), seed=0)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    started = time.perf_counter()
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=len(x), verbose=1)
    return {"model": LARGE, "rows": args.n_train, "validation_rows": args.n_val, "batch_size": args.batch_size,
            "max_train_seconds": args.max_train_seconds, "fit_s": round(time.perf_counter() - started, 1),
            "sft_seconds": round(optimizer.sft_seconds, 1), "sft_steps": optimizer.sft_steps,
            "peak_rss_mb": round(peak_rss_mb()), "comparisons": history.comparisons,
            "model_after": program.modules[-1].language_model.model}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="optimiser steps to time (without --fit)")
    parser.add_argument("--fit", action="store_true", help="run the whole fit instead of timing steps")
    parser.add_argument("--max-train-seconds", type=float, default=1200)
    parser.add_argument("--n-train", type=int, default=360)
    parser.add_argument("--n-val", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default="/tmp/promptgym-local-large")
    parser.add_argument("--out", required=True, help="the JSON file to write (under bench/results/)")
    args = parser.parse_args()
    started = time.perf_counter()
    result = asyncio.run(fit(args)) if args.fit else time_steps(args)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["command"] = " ".join(sys.argv)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "comparisons"}, indent=2))


if __name__ == "__main__":
    main()
