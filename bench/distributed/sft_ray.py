"""SFT seconds per step: the local loop vs Ray Train with 1 and 2 CPU workers, on this machine.

The same job (same rows, seed and settings) three times:

- local: the loop in this process, torch's default threads (every core);
- Ray Train, 1 worker x every core: the same loop in one TorchTrainer worker (DDP over gloo with one copy);
- Ray Train, 2 workers x (cores / 2) threads: each worker takes half of every micro-batch.

Each Ray setting starts its own local Ray instance (as ``promptgym train --executor ray`` does). Reported:
the median seconds of a step (steps 2..N, from history.csv, which the first worker measures, waits for the
all-reduce included), when the first step ended (model loads, Ray start, first evaluation), the whole
run's wall time, and the final eval loss (equal across settings up to rounding: no dropout here). The GGUF
export is left out (it runs in this process whichever the backend).

Run (SmolLM2 is a real model, so under the LLM lock):
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/distributed/sft_ray.py --model smollm2
    .venv/bin/python bench/distributed/sft_ray.py --model tiny
Writes bench/results/distributed_sft_ray_<model>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def settings_for(model: str, folder: Path, rows: int) -> Any:
    from promptgym.finetune import SFTSettings

    if model == "tiny":
        from tests.finetune.tiny_model import build_tiny_model, capital_rows, write_rows

        base = str(build_tiny_model(folder / "tiny-model"))
        train = str(write_rows(folder / "train.jsonl", capital_rows(rows)))
        validation = None
    else:
        base = "local/smollm2-135m-instruct"
        data = ROOT / "examples" / "configs" / "data"
        train, validation = str(data / "dates_dmy_sft_train.jsonl"), str(data / "dates_dmy_sft_validation.jsonl")
    return SFTSettings(base_model=base, train_file=train, validation_file=validation, examples=rows, n_epochs=1,
                       batch_size=4, learning_rate=2e-4, save_steps=10_000, summary_samples=0, validation_split=0.1,
                       lora={"r": 16, "alpha": 32, "dropout": 0.0}, export={"merged": "none", "adapter": True}
                       if model != "tiny" else {"merged": "q8_0", "adapter": False})


def one_setting(name: str, settings: Any, folder: Path, backend: Any) -> dict[str, Any]:
    from promptgym.finetune import SFTJob, run_sft
    from promptgym.finetune.history import StepHistory

    started = time.perf_counter()
    job = SFTJob.prepare(settings, name="bench")
    result = run_sft(job, folder, executor=backend)
    wall = time.perf_counter() - started
    steps = [row for row in StepHistory(folder / "history.csv").rows() if row.get("seconds") is not None]
    seconds = [float(row["seconds"]) for row in steps[1:]] or [float(steps[0]["seconds"])]
    row = {"setting": name, "steps": len(steps), "s_per_step_median": round(statistics.median(seconds), 3),
           "s_per_step_min": round(min(seconds), 3), "first_step_done_at_s": steps[0]["elapsed_s"],
           "wall_s": round(wall, 1), "final_eval_loss": result.final_eval_loss}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    parser.add_argument("--rows", type=int, default=None, help="training rows (default: 40 tiny, 32 smollm2)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = args.rows or (40 if args.model == "tiny" else 32)

    import promptgym.finetune.weight_run as finish
    from promptgym.distributed.sft_train import RayTrainExecutor

    finish.export_files = lambda job, folder, adapter_dir, name, on_event: {}  # the export is not what we measure
    finish.register_finetuned_model = lambda entry: entry  # nor the registry: the bench's models aren't listed
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="sft-ray-bench-") as scratch:
        folder = Path(scratch)
        settings = settings_for(args.model, folder, rows)
        table = [
            one_setting(f"local, 1 process x {cores} threads", settings, folder / "local", None),
            one_setting(f"Ray Train, 1 worker x {cores} threads", settings, folder / "ray1",
                        RayTrainExecutor(num_workers=1, threads=cores)),
            one_setting(f"Ray Train, 2 workers x {max(1, cores // 2)} thread(s)", settings, folder / "ray2",
                        RayTrainExecutor(num_workers=2, threads=max(1, cores // 2))),
        ]
    local = table[0]["s_per_step_median"]
    for row in table[1:]:
        row["step_vs_local"] = round(row["s_per_step_median"] / local, 2) if local else None
    out = args.out or ROOT / "bench" / "results" / f"distributed_sft_ray_{args.model}.json"
    report = {"bench": "distributed_sft_ray", "model": settings.base_model if args.model != "tiny" else "tiny (2-layer Llama)",
              "rows": rows, "batch_size": settings.batch_size, "cpus": cores, "load_average": list(os.getloadavg()),
              "settings": table}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
