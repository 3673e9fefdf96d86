"""promptgym's GRPO vs TRL's GRPOTrainer, side by side in one run: seconds per iteration and peak RSS.

Same base weights (SmolLM2-135M-Instruct from our GGUF package, dequantised once), same prompts in the same
order (the acronym task's training seeds as promptgym's iterations take them), same group size, prompts per
iteration, completion length, temperature, learning rate and LoRA (r=16, alpha=32, no dropout, 7 projections),
beta 0, one update per batch, token-level loss. TRL's reward function calls the task's own logic in-process;
promptgym's rollouts go through the task app over HTTP, as in a real run. Each trainer runs in its own
process, one after the other, so each peak RSS is its own; with --repeats they alternate, so a busier moment
of the shared machine hits both. The first iteration (warm-up) is left out of the medians. Besides wall
seconds per iteration, each side reports its process's CPU seconds per iteration (less sensitive to the
machine's other load; promptgym's excludes the task app's process, which only scores the replies).
TRL's GRPOConfig turns gradient checkpointing on by default; it is off here (as promptgym, which has none in
RL) unless --trl-gradient-checkpointing.

    bench/peers/setup.sh        # once: the `trl` venv
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/rl/vs_trl.py --iterations 10 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))
from trl_worker import TRL_PYTHON, run_worker  # noqa: E402

from grpo_settings import add_grpo_arguments, grpo_argv  # noqa: E402  (this script's folder)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = ROOT / "bench" / "results"


def summary(measured: dict) -> dict:
    steady = measured["step_seconds"][1:] or measured["step_seconds"]
    cpu = measured["step_cpu_seconds"][1:] or measured["step_cpu_seconds"]
    rewards = [r for r in measured["rewards"] if r is not None]
    return {"median_step_s": round(statistics.median(steady), 3), "mean_step_s": round(statistics.mean(steady), 3),
            "median_step_cpu_s": round(statistics.median(cpu), 3),
            "first_step_s": measured["step_seconds"][0], "peak_rss_mb": measured["peak_rss_mb"],
            "load_s": measured["load_s"], "wall_s": measured["wall_s"],
            "mean_completion_tokens": round(statistics.mean(measured["completion_tokens"]), 1),
            "mean_reward_first_half": round(statistics.mean(rewards[: len(rewards) // 2]), 4),
            "mean_reward_second_half": round(statistics.mean(rewards[len(rewards) // 2:]), 4)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="local/smollm2-135m-instruct")
    add_grpo_arguments(parser)
    parser.add_argument("--repeats", type=int, default=1, help="runs of each trainer, alternating")
    parser.add_argument("--trl-gradient-checkpointing", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "examples"))
    from rl_acronyms import SPLITS

    from promptgym.finetune.base_model import ensure_hf_weights, resolve_base_model
    from promptgym.finetune.rl.rollouts import iteration_tasks

    base_dir = ensure_hf_weights(resolve_base_model(args.base))  # derived once, before any timing
    order = [seed for i in range(args.iterations)
             for seed, _ in iteration_tasks(SPLITS["train"], args.batch_size, 1, 0, i)]
    scratch = Path(tempfile.mkdtemp(prefix="rl-vs-trl-"))
    (scratch / "seeds.json").write_text(json.dumps(order))
    common = grpo_argv(args)
    runs: dict[str, list[dict]] = {"promptgym": [], "trl": []}
    load = [round(os.getloadavg()[0], 2)]
    for repeat in range(args.repeats):
        runs["promptgym"].append(run_worker([sys.executable, str(HERE / "train_promptgym.py"), "--base", args.base,
                                             *common]))
        runs["trl"].append(run_worker([str(TRL_PYTHON), str(HERE / "train_trl.py"), "--base-dir", str(base_dir),
                                       "--seeds", str(scratch / "seeds.json"), "--out", str(scratch / f"trl{repeat}"),
                                       *common, *(["--gradient-checkpointing"] if args.trl_gradient_checkpointing else [])]))
        load.append(round(os.getloadavg()[0], 2))
    report = {"base": args.base, "settings": vars(args), "machine": f"{os.cpu_count()} cores",
              "lora": "r=16 alpha=32 dropout=0, 7 projections", "load_average_1min": load}
    for name, measured_runs in runs.items():
        rows = [summary(measured) for measured in measured_runs]
        report[name] = {
            "median_step_s": round(statistics.median(row["median_step_s"] for row in rows), 3),
            "median_step_cpu_s": round(statistics.median(row["median_step_cpu_s"] for row in rows), 3),
            "peak_rss_mb": max(row["peak_rss_mb"] for row in rows),
            "mean_completion_tokens": round(statistics.mean(row["mean_completion_tokens"] for row in rows), 1),
            "mean_reward_first_half": rows[-1]["mean_reward_first_half"],
            "mean_reward_second_half": rows[-1]["mean_reward_second_half"], "runs": rows,
            "step_seconds": [measured["step_seconds"] for measured in measured_runs],
            "step_cpu_seconds": [measured["step_cpu_seconds"] for measured in measured_runs]}
        if name == "promptgym":
            report[name]["rollout_seconds"] = [measured["rollout_seconds"] for measured in measured_runs]
            report[name]["update_seconds"] = [measured["update_seconds"] for measured in measured_runs]
    report["ratio_step_time"] = round(report["promptgym"]["median_step_s"] / report["trl"]["median_step_s"], 3)
    report["ratio_step_cpu"] = round(report["promptgym"]["median_step_cpu_s"] / report["trl"]["median_step_cpu_s"], 3)
    report["ratio_peak_rss"] = round(report["promptgym"]["peak_rss_mb"] / report["trl"]["peak_rss_mb"], 3)
    out = Path(args.json) if args.json else RESULTS / f"rl_vs_trl_{args.base.split('/')[-1]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print("| | median s/iteration | median CPU s/iteration | peak RSS MB | completion tokens/iteration | "
          "reward 1st half | 2nd half |")
    print("|---|---|---|---|---|---|---|")
    for name in ("promptgym", "trl"):
        r = report[name]
        print(f"| {name} | {r['median_step_s']} | {r['median_step_cpu_s']} | {r['peak_rss_mb']:.0f} | "
              f"{r['mean_completion_tokens']} | "
              f"{r['mean_reward_first_half']} | {r['mean_reward_second_half']} |")
    print(f"ratios promptgym/trl: step time {report['ratio_step_time']}, CPU per step {report['ratio_step_cpu']}, "
          f"peak RSS {report['ratio_peak_rss']}; {out}")


if __name__ == "__main__":
    main()
