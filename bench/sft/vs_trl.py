"""promptgym's SFT vs TRL's SFTTrainer + peft, side by side in one run: seconds per step, peak RSS, eval loss.

Same rows (the dates task as the program's chat messages), same base weights, same LoRA (r=16, alpha=32,
dropout 0.05 on the 7 projections), same max_length, batch, learning rate and schedule. Each trainer
runs in its own process (so peak RSS is its own); both adapters are then scored by one function here
(mean loss per assistant token on the same validation rows).

The two processes take turns step by step (``--turns``, the default): one step of promptgym, one of TRL,
and so on (the first of each pair alternating), so a busy moment of the shared machine falls on both
alike; other processes' load swings single step times several-fold on this machine.

    bench/peers/setup.sh        # once: the `trl` venv
    flock /tmp/promptgym-llm.lock .venv/bin/python bench/sft/vs_trl.py --base local/smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "peers"))
from data import date_rows, load_dates, write_jsonl  # noqa: E402
from trl_worker import TRL_PYTHON, run_worker  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"


def run_in_turns(commands: dict[str, list[str]], steps: int, scratch: Path) -> dict[str, dict]:
    """Start every command with ``--turns``; let each run one step in turn; return each one's final JSON line."""
    started = time.perf_counter()
    processes = {name: subprocess.Popen([*command, "--turns"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=(scratch / f"{name}.stderr").open("w"), text=True, bufsize=1)
                 for name, command in commands.items()}

    def wait_done(name: str) -> None:
        for line in processes[name].stdout:  # other output (TRL's log lines) is skipped
            if line.strip() == "TURN-DONE":
                return
        raise SystemExit(f"{name} ended before its step:\n{(scratch / f'{name}.stderr').read_text()[-3000:]}")

    order = list(commands)
    for step in range(steps):
        for name in (order if step % 2 == 0 else order[::-1]):
            processes[name].stdin.write("go\n")
            processes[name].stdin.flush()
            wait_done(name)
    results = {}
    for name, process in processes.items():
        output = process.stdout.read()
        if process.wait() != 0:
            raise SystemExit(f"{name} failed:\n{(scratch / f'{name}.stderr').read_text()[-3000:]}")
        results[name] = json.loads(output.strip().splitlines()[-1])
        results[name]["wall_s"] = round(time.perf_counter() - started, 2)
    return results


def eval_loss(base_dir: Path, adapter: str, validation: list[list[dict]], batch_size: int) -> float:
    """Mean loss per assistant token of base + adapter on the validation rows (the same function for both)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from promptgym.finetune.batches import batches_of, collate
    from promptgym.finetune.encoding import encode_conversation
    from promptgym.finetune.loss import chunked_causal_lm_loss

    tokenizer = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32, local_files_only=True)
    model = PeftModel.from_pretrained(base, adapter).eval()
    encoded = [encode_conversation(tokenizer, messages, "assistant") for messages in validation]
    total, count = 0.0, 0
    with torch.no_grad():
        for indices in batches_of(list(range(len(encoded))), batch_size):
            batch = collate([encoded[i] for i in indices], tokenizer.pad_token_id or 0)
            loss_sum, tokens = chunked_causal_lm_loss(model, batch.input_ids, batch.attention_mask, batch.labels)
            total, count = total + float(loss_sum), count + tokens
    return total / count


def summary(measured: dict) -> dict:
    steady = measured["step_seconds"][1:] or measured["step_seconds"]
    cpu = measured["step_cpu_seconds"][1:] or measured["step_cpu_seconds"]
    return {"median_step_s": round(statistics.median(steady), 3), "mean_step_s": round(statistics.mean(steady), 3),
            "median_step_cpu_s": round(statistics.median(cpu), 3), "mean_step_cpu_s": round(statistics.mean(cpu), 3),
            "first_step_s": measured["step_seconds"][0], "peak_rss_mb": measured["peak_rss_mb"],
            "final_train_loss": measured["losses"][-1] if measured["losses"] else None,
            "trainable_parameters": measured["trainable_parameters"], "load_s": measured["load_s"],
            "steps": measured["steps"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="local/smollm2-135m-instruct")
    parser.add_argument("--train-rows", type=int, default=64)
    parser.add_argument("--validation-rows", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--trl-gradient-checkpointing", action="store_true")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each trainer")
    parser.add_argument("--no-turns", dest="turns", action="store_false",
                        help="run the trainers one after the other instead of step by step in turns")
    parser.add_argument("--json", default=None)
    parser.add_argument("--with-fp32-path", action="store_true", help="also promptgym with precision fp32 and no "
                        "shared prefix (the path before issue 29), as a third trainer")
    args = parser.parse_args()

    from promptgym.finetune.base_model import ensure_hf_weights, resolve_base_model

    base_dir = ensure_hf_weights(resolve_base_model(args.base))  # derived once, before any timing
    (x, y), (x_val, y_val) = load_dates(n_train=args.train_rows, n_test=args.validation_rows, seed=1)
    scratch = Path(tempfile.mkdtemp(prefix="sft-vs-trl-"))
    train = write_jsonl(scratch / "train.jsonl", date_rows(x, y))
    validation = [row["messages"] for row in date_rows(x_val, y_val)]
    common = ["--train", str(train), "--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
    runs: dict[str, list[dict]] = {"promptgym": [], "trl": [], **({"promptgym_fp32": []} if args.with_fp32_path else {})}
    load = [round(os.getloadavg()[0], 2)]
    steps = -(-args.train_rows // args.batch_size)
    for repeat in range(args.repeats):  # alternate, so a busier moment of the machine hits both
        commands = {
            "promptgym": [sys.executable, str(HERE / "train_promptgym.py"), "--base", args.base,
                          "--out", str(scratch / f"promptgym{repeat}"), *common],
            "trl": [str(TRL_PYTHON), str(HERE / "train_trl.py"), "--base-dir", str(base_dir),
                    "--out", str(scratch / f"trl{repeat}"), *common,
                    *(["--gradient-checkpointing"] if args.trl_gradient_checkpointing else [])]}
        if args.with_fp32_path:
            commands["promptgym_fp32"] = [sys.executable, str(HERE / "train_promptgym.py"), "--base", args.base,
                                          "--out", str(scratch / f"promptgym_fp32{repeat}"), *common,
                                          "--precision", "fp32", "--no-share-prefix"]
        if args.turns:
            for name, measured in run_in_turns(commands, steps, scratch).items():
                runs[name].append(measured)
        else:
            for name, command in commands.items():
                runs[name].append(run_worker(command))
        load.append(round(os.getloadavg()[0], 2))
    report = {"base": args.base, "train_rows": args.train_rows, "validation_rows": args.validation_rows,
              "batch_size": args.batch_size, "max_length": args.max_length, "lora": "r=16 alpha=32 dropout=0.05, 7 projections",
              "trl_gradient_checkpointing": args.trl_gradient_checkpointing, "machine": f"{os.cpu_count()} cores",
              "repeats": args.repeats, "turns": args.turns, "load_average_1min": load}
    for name, measured_runs in runs.items():
        rows = [summary(measured) for measured in measured_runs]
        report[name] = {
            "median_step_s": round(statistics.median(row["median_step_s"] for row in rows), 3),
            "median_step_cpu_s": round(statistics.median(row["median_step_cpu_s"] for row in rows), 3),
            "mean_step_s": round(statistics.mean(row["mean_step_s"] for row in rows), 3),
            "mean_step_cpu_s": round(statistics.mean(row["mean_step_cpu_s"] for row in rows), 3),
            "peak_rss_mb": max(row["peak_rss_mb"] for row in rows),
            "final_train_loss": rows[-1]["final_train_loss"], "trainable_parameters": rows[-1]["trainable_parameters"],
            "final_eval_loss": round(eval_loss(base_dir, measured_runs[-1]["adapter"], validation, args.batch_size), 4),
            "epoch_s": round(statistics.mean(sum(measured["step_seconds"]) for measured in measured_runs), 1),
            "epoch_cpu_s": round(statistics.mean(sum(measured["step_cpu_seconds"]) for measured in measured_runs), 1),
            "runs": rows, "step_seconds": [measured["step_seconds"] for measured in measured_runs],
            "step_cpu_seconds": [measured["step_cpu_seconds"] for measured in measured_runs]}
    report["ratio_step_time"] = round(report["promptgym"]["median_step_s"] / report["trl"]["median_step_s"], 3)
    report["ratio_step_cpu"] = round(report["promptgym"]["median_step_cpu_s"] / report["trl"]["median_step_cpu_s"], 3)
    report["ratio_mean_step_time"] = round(report["promptgym"]["mean_step_s"] / report["trl"]["mean_step_s"], 3)
    report["ratio_mean_step_cpu"] = round(report["promptgym"]["mean_step_cpu_s"] / report["trl"]["mean_step_cpu_s"], 3)
    report["ratio_peak_rss"] = round(report["promptgym"]["peak_rss_mb"] / report["trl"]["peak_rss_mb"], 3)
    out = Path(args.json) if args.json else RESULTS / f"sft_vs_trl_{args.base.split('/')[-1]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if args.with_fp32_path:
        old = report["promptgym_fp32"]
        report["speedup_over_fp32_path"] = round(old["epoch_s"] / report["promptgym"]["epoch_s"], 3)
        report["speedup_over_fp32_path_cpu"] = round(old["epoch_cpu_s"] / report["promptgym"]["epoch_cpu_s"], 3)
        report["eval_loss_vs_fp32_path"] = round(report["promptgym"]["final_eval_loss"] / old["final_eval_loss"], 4)
        out.write_text(json.dumps(report, indent=2) + "\n")
    print("| | s/epoch | CPU s/epoch | median s/step | median CPU s/step | peak RSS MB | final eval loss |")
    print("|---|---|---|---|---|---|---|")
    for name in runs:
        r = report[name]
        print(f"| {name} | {r['epoch_s']} | {r['epoch_cpu_s']} | {r['median_step_s']} | {r['median_step_cpu_s']} | "
              f"{r['peak_rss_mb']:.0f} | {r['final_eval_loss']} |")
    print(f"ratios promptgym/trl: median step time {report['ratio_step_time']}, CPU per step {report['ratio_step_cpu']}; "
          f"mean {report['ratio_mean_step_time']}, {report['ratio_mean_step_cpu']}; peak RSS {report['ratio_peak_rss']}; {out}")


if __name__ == "__main__":
    main()
