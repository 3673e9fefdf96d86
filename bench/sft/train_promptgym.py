"""One side of bench/sft/vs_trl.py: promptgym's SFT on the given rows; prints a JSON line of measurements.

    python bench/sft/train_promptgym.py --base local/smollm2-135m-instruct --train rows.jsonl --out DIR
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from promptgym.finetune import SFTJob, SFTSettings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-on", default="assistant", choices=["assistant", "all"])
    args = parser.parse_args()
    started = time.perf_counter()
    settings = SFTSettings(base_model=args.base, train_file=args.train, validation_split=0, n_epochs=args.epochs,
                           batch_size=args.batch_size, max_length=args.max_length, learning_rate=2e-4, seed=0, train_on=args.train_on,
                           save_steps=10_000, summary_samples=0, export={"merged": "none", "adapter": True})
    job = SFTJob.prepare(settings, name="bench")
    loaded = time.perf_counter() - started
    steps: list[dict] = []
    cpu_marks: list[float] = []

    def record(event) -> None:  # process CPU time between steps: robust to other load on the machine
        if event.kind in ("sft_started", "sft_step"):
            cpu_marks.append(time.process_time())
        if event.kind == "sft_step":
            steps.append(dict(event))

    result = job.run(Path(args.out), on_event=record)
    print(json.dumps({
        "framework": "promptgym", "load_s": round(loaded, 2), "steps": len(steps),
        "step_seconds": [s["seconds"] for s in steps],
        "step_cpu_seconds": [round(b - a, 3) for a, b in zip(cpu_marks, cpu_marks[1:])], "losses": [s["loss"] for s in steps],
        "tokens_per_s": [s["tokens_per_s"] for s in steps], "peak_rss_mb": result.peak_rss_mb,
        "adapter": str(Path(args.out) / result.checkpoints[-1]["path"]),
        "trainable_parameters": job.trainable_parameters, "total_s": round(time.perf_counter() - started, 2)}))


if __name__ == "__main__":
    main()
