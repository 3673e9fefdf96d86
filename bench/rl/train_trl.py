"""The other side of bench/rl/vs_trl.py: TRL's GRPOTrainer with a peft LoRA on the same prompts and settings.

Runs in the `trl` venv of bench/peers/setup.sh (same torch, transformers and peft as promptgym), on the same
base weights (promptgym's cached Hugging Face copy of the GGUF). The reward function calls the task's own
logic (examples/acronyms_task.py, the module the task app serves). Prints one JSON line: seconds per step
(generation + reward + update, timed by a callback), peak RSS, rewards.

    python bench/rl/train_trl.py --base-dir HF_DIR --seeds seeds.json --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from grpo_settings import add_grpo_arguments  # this script's folder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-dir", required=True)
    parser.add_argument("--seeds", required=True, help="JSON list: the prompts' seeds, in the order promptgym takes them")
    parser.add_argument("--out", required=True)
    add_grpo_arguments(parser)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--gradient-checkpointing", action="store_true", help="TRL's GRPOConfig default; off to match promptgym")
    args = parser.parse_args()
    started = time.perf_counter()

    import torch
    from acronyms_task import INSTRUCTIONS, phrase, question, score
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    seeds = json.loads(Path(args.seeds).read_text())
    rows = []
    for seed in seeds:
        text, acronym = phrase(seed)
        rows.append({"prompt": [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": question(text)}],
                     "acronym": acronym})
    tokenizer = AutoTokenizer.from_pretrained(args.base_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(args.base_dir, dtype=torch.float32, local_files_only=True)
    loaded = time.perf_counter() - started

    def reward(completions, acronym, **_):
        return [score(completion[0]["content"], expected) for completion, expected in zip(completions, acronym)]

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.cpu_seconds: list[float] = []
            self._begin = self._cpu = 0.0

        def on_step_begin(self, *_, **__):
            self._begin, self._cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, *_, **__):
            self.seconds.append(round(time.perf_counter() - self._begin, 3))
            self.cpu_seconds.append(round(time.process_time() - self._cpu, 3))

    config = GRPOConfig(
        output_dir=args.out, use_cpu=True, bf16=False, report_to=[], save_strategy="no", logging_steps=1, seed=0,
        per_device_train_batch_size=args.batch_size * args.group_size, gradient_accumulation_steps=1,
        num_generations=args.group_size, max_completion_length=args.max_new_tokens, temperature=args.temperature,
        learning_rate=args.learning_rate, max_steps=args.iterations, beta=0.0, loss_type="dapo", num_iterations=1,
        shuffle_dataset=False, disable_dropout=True, dataloader_num_workers=0,
        gradient_checkpointing=args.gradient_checkpointing)
    peft_config = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    timer = StepTimer()
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer, peft_config=peft_config, callbacks=[timer])
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    print(json.dumps({
        "step_seconds": timer.seconds, "step_cpu_seconds": timer.cpu_seconds, "load_s": round(loaded, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rewards": [round(entry["reward"], 4) for entry in logs],
        "completion_tokens": [round(entry.get("completions/mean_length", 0) * args.batch_size * args.group_size)
                              for entry in logs],
        "torch_threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
