"""One side of bench/rl/vs_trl.py: promptgym's GRPO against the example task app, over HTTP as in a real run.

The app (examples/rl_acronyms.py) runs in its own process, started as `task_app` does; this process holds
the model, the policy server and the optimiser, so its peak RSS is the trainer's. Evaluation is cut to 4
test seeds and no validation (TRL's side evaluates nothing). Prints one JSON line like train_trl.py.

    python bench/rl/train_promptgym.py --base local/smollm2-135m-instruct --iterations 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import tempfile
import time
from pathlib import Path

from grpo_settings import add_grpo_arguments  # this script's folder

ROOT = Path(__file__).resolve().parents[2]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="local/smollm2-135m-instruct")
    add_grpo_arguments(parser)
    parser.add_argument("--lora-r", type=int, default=16)
    args = parser.parse_args()
    started = time.perf_counter()

    import promptgym.finetune.weight_run as finish
    from promptgym.finetune.rl import RLJob, RLSettings
    from promptgym.finetune.rl.grpo import SeedSplits
    from promptgym.finetune.settings import LoraSettings
    from promptgym.taskapp import TaskAppEnvironment
    from promptgym.taskapp.launch import launch_task_app

    finish.export_files = lambda job, folder, adapter, name, on_event: {}  # speed only: no export, no registry
    finish.register_finetuned_model = lambda entry: entry
    work = Path(tempfile.mkdtemp(prefix="rl-vs-trl-"))
    key = secrets.token_urlsafe(16)
    app = launch_task_app(ROOT / "examples" / "rl_acronyms.py", env={**os.environ, "TASK_APP_API_KEY": key},
                          log=work / "app.log")
    try:
        environment = await TaskAppEnvironment.connect(app.url, api_key=key, concurrency=64, timeout=600)
        settings = RLSettings(base_model=args.base, iterations=args.iterations, group_size=args.group_size,
                              batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                              learning_rate=args.learning_rate, eval_every=0, save_steps=args.iterations,
                              lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r, dropout=0.0))
        job = RLJob.prepare(settings)
        loaded = time.perf_counter() - started
        iterations, cpu_seconds, last_cpu = [], [], [time.process_time()]

        def record(event) -> None:  # CPU of this process between events: iteration i's is since the event before it
            now = time.process_time()
            if event.kind == "rl_iteration":
                iterations.append(event)
                cpu_seconds.append(round(now - last_cpu[0], 3))
            last_cpu[0] = now

        splits = SeedSplits(environment.splits["train"], [], environment.splits["test"][:4])
        await job.run(environment, work / "run", on_event=record, splits=splits)
    finally:
        app.stop()
    print(json.dumps({
        "step_seconds": [round(e.seconds, 3) for e in iterations], "step_cpu_seconds": cpu_seconds,
        "load_s": round(loaded, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rewards": [e.mean_reward for e in iterations], "completion_tokens": [e.completion_tokens for e in iterations],
        "rollout_seconds": [e.rollout_s for e in iterations], "update_seconds": [e.update_s for e in iterations],
        "zero_signal_groups": sum(e.zero_signal_groups for e in iterations),
    }))


if __name__ == "__main__":
    asyncio.run(main())
