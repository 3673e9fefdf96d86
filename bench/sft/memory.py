"""Peak RSS of SFT at max_length 512, SmolLM2-135M and Qwen2.5-Coder-0.5B (152k vocabulary), batch 4.

Rows of about 500 tokens (a long user turn, a long answer), loss on every token (``train_on = "all"``:
every position needs its logits, the worst case for memory), a few steps (``--steps``), each trainer in its
own process, without and with activation checkpointing (``gradient_checkpointing``, TRL's default); TRL's
SFTTrainer + peft on the same rows for comparison (``--trl-models``). TRL is left out for Qwen by default:
it materialises float32 logits for every position (4 x 512 x 152k floats: 1.2 GB, and as much again for each
copy the loss and its gradient make; MODELS.md measured 13.1 GB RSS at 4 x 256 without checkpointing).
The report is rewritten after each model, so a cut run keeps what it measured.

    flock /tmp/promptgym-llm.lock .venv/bin/python bench/sft/memory.py --steps 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data import write_jsonl  # noqa: E402
from vs_trl import HERE, RESULTS, TRL_PYTHON, run_worker  # noqa: E402

MODELS = ("local/smollm2-135m-instruct", "local/qwen2.5-coder-0.5b-instruct")
WORDS = ("river stone window garden cloud lamp table bird mountain door chair tree sky house path field "
         "letter number market silver winter summer harbour bridge station").split()


def long_rows(count: int, tokens: int, tokenizer) -> list[dict]:
    """Chat rows whose rendering is just under ``tokens`` tokens with this model's template."""
    from promptgym.finetune.encoding import encode_conversation

    rows = []
    for index in range(count):
        words = [WORDS[(index * 7 + k) % len(WORDS)] for k in range(tokens)]
        size = tokens // 2
        while True:
            row = {"messages": [{"role": "user", "content": "Repeat the list: " + " ".join(words[:size])},
                                {"role": "assistant", "content": " ".join(words[:size])}]}
            if len(encode_conversation(tokenizer, row["messages"], "all").input_ids) <= tokens or size < 10:
                break
            size -= 5
        rows.append(row)
    return rows


def measured(run: dict) -> dict:
    return {key: run[key] for key in ("peak_rss_mb", "step_seconds", "step_cpu_seconds", "load_s")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3, help="optimiser steps per trainer (peak RSS is reached in the first)")
    parser.add_argument("--trl-models", default=MODELS[0], help="models TRL also trains (comma list, or none)")
    parser.add_argument("--checkpointing", default="off,on",
                        help="activation checkpointing settings to measure (comma list of off, on)")
    parser.add_argument("--json", default=str(RESULTS / "sft_memory.json"))
    args = parser.parse_args()

    from promptgym.finetune.base_model import ensure_hf_weights, load_tokenizer, resolve_base_model

    previous = Path(args.json)  # a run for one model keeps the other models' numbers
    report = json.loads(previous.read_text()) if previous.is_file() else {}
    report = {"max_length": args.max_length, "batch_size": args.batch_size, "steps": args.steps, "train_on": "all",
              "machine": f"{os.cpu_count()} cores", "models": report.get("models", {})}
    for model in args.models.split(","):
        source = resolve_base_model(model)
        base_dir = ensure_hf_weights(source)
        rows = long_rows(args.batch_size * args.steps, args.max_length - 8, load_tokenizer(source))
        scratch = Path(tempfile.mkdtemp(prefix="sft-memory-"))
        train = write_jsonl(scratch / "train.jsonl", rows)
        common = ["--train", str(train), "--batch-size", str(args.batch_size), "--max-length", str(args.max_length)]
        entry = report["models"].get(model, {})
        wanted = args.checkpointing.split(",")
        variants = [flag for setting, flag in (("off", []), ("on", ["--gradient-checkpointing"])) if setting in wanted]
        for checkpointing in variants:  # "_gc": activation checkpointing on
            name = "promptgym" + ("_gc" if checkpointing else "")
            entry[name] = measured(run_worker([sys.executable, str(HERE / "train_promptgym.py"), "--base", model,
                                               "--train-on", "all", "--out", str(scratch / name), *common, *checkpointing]))
            print(model, name, json.dumps(entry[name]), flush=True)
            if model in args.trl_models.split(","):  # TRL's SFTConfig turns it on by default
                name = "trl" + ("_gc" if checkpointing else "")
                entry[name] = measured(run_worker([str(TRL_PYTHON), str(HERE / "train_trl.py"), "--base-dir", str(base_dir),
                                                   "--out", str(scratch / name), "--all-tokens", *common, *checkpointing]))
                print(model, name, json.dumps(entry[name]), flush=True)
        report["models"][model] = entry
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
