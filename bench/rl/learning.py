"""Does the example task app's reward improve under promptgym's GRPO? Eval reward before/after, the curve, wall time.

Starts examples/rl_acronyms.py on a free port (as `task_app` does), trains with the Python API, and writes
bench/results/rl_learning_<tag>.json (settings, history rows, evaluations, timings) and a reward plot.

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/rl/learning.py --iterations 30 --tag example

or summarises a finished CLI run (e.g. of examples/configs/rl_acronyms.toml) the same way, without training:

    .venv/bin/python bench/rl/learning.py --from-run runs/<run id> --tag example
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

from grpo_settings import add_grpo_arguments  # this script's folder

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def summarise(events: list[dict], settings: dict, extra: dict) -> dict:
    """The numbers of a run from its events: before/after, evaluations, seconds per phase, zero-signal groups."""
    iterations = [e for e in events if e["event"] == "rl_iteration"]
    evaluations = [e for e in events if e["event"] == "rl_evaluation"]
    return {
        "settings": settings, **extra,
        "eval_before": next(e for e in evaluations if e["label"] == "before"),
        "eval_after": next(e for e in evaluations if e["label"] == "after"), "evaluations": evaluations,
        "mean_iteration_s": round(sum(e["seconds"] for e in iterations) / len(iterations), 2),
        "median_iteration_s": round(sorted(e["seconds"] for e in iterations)[len(iterations) // 2], 2),
        "mean_rollout_s": round(sum(e["rollout_s"] for e in iterations) / len(iterations), 2),
        "mean_update_s": round(sum(e["update_s"] for e in iterations) / len(iterations), 2),
        "zero_signal_groups": sum(e["zero_signal_groups"] for e in iterations),
        "groups": sum(e["groups"] for e in iterations), "iterations": iterations,
    }


def write(summary: dict, tag: str, plot: Path) -> None:
    import shutil

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"rl_learning_{tag}.json").write_text(json.dumps(summary, indent=1) + "\n")
    if plot.is_file():
        shutil.copy(plot, RESULTS / f"rl_learning_{tag}.png")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("iterations", "evaluations")}, indent=1))


def from_run(folder: Path, tag: str) -> None:
    """Summarise a CLI run folder (its events, run.json and config) instead of training."""
    import tomllib

    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]
    status = json.loads((folder / "run.json").read_text())
    config = tomllib.loads((folder / "config.toml").read_text())
    phases = [e for e in events if e["event"] in ("run_started", "model_registered", "run_finished")]
    extra = {"source": f"promptgym train run {status['id']} ({', '.join(status.get('config_files') or [])})",
             "elapsed_s": status.get("elapsed_s"), "peak_rss_mb": status.get("peak_rss_mb"),
             "phase_times": {e["event"]: round(e["time"] - phases[0]["time"], 1) for e in phases},
             "final_status": status.get("final_status")}
    write(summarise(events, config.get("rl", {}), extra), tag, folder / "plots" / "reward.png")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from-run", default=None, help="summarise this CLI run folder instead of training")
    parser.add_argument("--base", default="local/smollm2-135m-instruct")
    add_grpo_arguments(parser, iterations=30)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--tag", default="run")
    parser.add_argument("--export", action="store_true", help="also export GGUF files (timed)")
    args = parser.parse_args()
    if args.from_run:
        return from_run(Path(args.from_run), args.tag)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from promptgym.finetune.rl import RLJob, RLSettings
    from promptgym.finetune.settings import ExportSettings, LoraSettings
    from promptgym.taskapp import TaskAppEnvironment
    from promptgym.taskapp.launch import launch_task_app

    work = Path(tempfile.mkdtemp(prefix="rl-learning-"))
    key = secrets.token_urlsafe(16)
    app = launch_task_app(ROOT / "examples" / "rl_acronyms.py", env={**os.environ, "TASK_APP_API_KEY": key},
                          log=work / "app.log")
    events: list[dict] = []
    started = time.time()
    try:
        settings = RLSettings(base_model=args.base, iterations=args.iterations, group_size=args.group_size,
                              batch_size=args.batch_size, learning_rate=args.learning_rate,
                              temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                              eval_every=args.eval_every, save_steps=max(args.iterations, 1),
                              lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r, dropout=0.0),
                              export=ExportSettings(merged="q8_0", adapter=True), model_name=f"rl-bench-{args.tag}-{secrets.token_hex(3)}")
        if not args.export:  # nothing exported: nothing registered either
            import promptgym.finetune.weight_run as finish

            finish.export_files = lambda job, folder, adapter, name, on_event: {}
            finish.register_finetuned_model = lambda entry: entry
        environment = await TaskAppEnvironment.connect(app.url, api_key=key, concurrency=64, timeout=600)
        loaded = time.time()
        job = RLJob.prepare(settings)
        load_s = time.time() - loaded

        def record(event) -> None:
            events.append({"event": event.kind, **event.payload()})
            if event.kind in ("rl_iteration", "rl_evaluation"):
                print(json.dumps(events[-1]), flush=True)

        result = await job.run(environment, work / "run", on_event=record)
    finally:
        app.stop()
    wall = time.time() - started
    extra = {"torch_threads": torch.get_num_threads(), "wall_s": round(wall, 1), "load_s": round(load_s, 1),
             "peak_rss_mb": result.peak_rss_mb, "final_status": result.final_status()}
    write(summarise(events, vars(args), extra), args.tag, work / "run" / "plots" / "reward.png")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    asyncio.run(main())
