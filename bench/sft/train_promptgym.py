"""One side of bench/sft/vs_trl.py: promptgym's SFT on the given rows; prints a JSON line of measurements.

    python bench/sft/train_promptgym.py --base local/smollm2-135m-instruct --train rows.jsonl --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from promptgym.finetune import SFTJob, SFTSettings, run_sft


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-on", default="assistant", choices=["assistant", "all"])
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--no-share-prefix", dest="share_prefix", action="store_false",
                        help="encode every row whole (the path before share_prefix)")
    parser.add_argument("--turns", action="store_true", help="wait for a line on stdin before each step, print "
                        "TURN-DONE after it (vs_trl.py alternates the two trainers step by step)")
    args = parser.parse_args()
    started = time.perf_counter()
    settings = SFTSettings(base_model=args.base, train_file=args.train, validation_split=0, n_epochs=args.epochs,
                           batch_size=args.batch_size, max_length=args.max_length, learning_rate=2e-4, seed=0, train_on=args.train_on,
                           save_steps=10_000, summary_samples=0, export={"merged": "none", "adapter": True},
                           gradient_checkpointing=args.gradient_checkpointing, device="cpu", precision=args.precision,
                           share_prefix=args.share_prefix)
    job = SFTJob.prepare(settings, name="bench")
    loaded = time.perf_counter() - started
    steps: list[dict] = []
    cpu_marks: list[float] = []

    def record(event) -> None:  # process CPU time between steps: robust to other load on the machine
        if event.kind == "sft_step":
            cpu_marks.append(time.process_time())
            steps.append(dict(event))
            if args.turns:
                print("TURN-DONE", flush=True)
        if event.kind in ("sft_started", "sft_step") and len(steps) < job.total_steps:
            if args.turns:
                sys.stdin.readline()  # the other trainer's step runs meanwhile
            cpu_marks.append(time.process_time())

    result = run_sft(job, Path(args.out), on_event=record)
    print(json.dumps({
        "framework": "promptgym", "load_s": round(loaded, 2), "steps": len(steps),
        "step_seconds": [s["seconds"] for s in steps],
        "step_cpu_seconds": [round(b - a, 3) for a, b in zip(cpu_marks[::2], cpu_marks[1::2])], "losses": [s["loss"] for s in steps],
        "tokens_per_s": [s["tokens_per_s"] for s in steps], "peak_rss_mb": result.peak_rss_mb,
        "adapter": str(Path(args.out) / result.checkpoints[-1]["path"]),
        "trainable_parameters": job.trainable_parameters, "total_s": round(time.perf_counter() - started, 2),
        "device": job.plan.describe(), "share_prefix": job.shares_prefix,
        "tokens": sum(len(row.input_ids) for row in job.data.train) * args.epochs}))


if __name__ == "__main__":
    main()
