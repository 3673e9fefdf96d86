"""The other side of bench/sft/vs_trl.py: TRL's SFTTrainer with a peft LoRA on the same rows and settings.

Runs in the `trl` venv of bench/peers/setup.sh (same torch, transformers and peft as promptgym), on the
same base weights (promptgym's cached Hugging Face copy of the GGUF). Loss on the assistant turn only:
rows are given to TRL as conversational prompt/completion pairs (its completion-only loss), since its
``assistant_only_loss`` needs ``{% generation %}`` markers that the model's chat template lacks.

    python bench/sft/train_trl.py --base-dir HF_DIR --train rows.jsonl --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-dir", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--all-tokens", action="store_true", help="loss on every token (a messages dataset)")
    parser.add_argument("--turns", action="store_true", help="wait for a line on stdin before each step, print "
                        "TURN-DONE after it (vs_trl.py alternates the two trainers step by step)")
    args = parser.parse_args()
    started = time.perf_counter()

    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    rows = [json.loads(line)["messages"] for line in open(args.train, encoding="utf-8") if line.strip()]
    if args.all_tokens:
        dataset = Dataset.from_list([{"messages": messages} for messages in rows])
    else:
        dataset = Dataset.from_list([{"prompt": messages[:-1], "completion": messages[-1:]} for messages in rows])
    tokenizer = AutoTokenizer.from_pretrained(args.base_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(args.base_dir, dtype=torch.float32, local_files_only=True)
    loaded = time.perf_counter() - started

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.cpu_seconds: list[float] = []
            self.losses: list[float] = []
            self._begin = self._cpu = 0.0

        def on_step_begin(self, *_, **__):
            if args.turns:
                sys.stdin.readline()  # the other trainer's step runs meanwhile
            self._begin, self._cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, *_, **__):
            self.seconds.append(round(time.perf_counter() - self._begin, 3))
            self.cpu_seconds.append(round(time.process_time() - self._cpu, 3))
            if args.turns:
                print("TURN-DONE", flush=True)

        def on_log(self, _args, _state, _control, logs=None, **__):
            if logs and "loss" in logs:
                self.losses.append(round(float(logs["loss"]), 5))

    timer = StepTimer()
    config = SFTConfig(
        output_dir=args.out, per_device_train_batch_size=args.batch_size, gradient_accumulation_steps=1,
        num_train_epochs=args.epochs, learning_rate=2e-4, lr_scheduler_type="linear", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=1.0, max_length=args.max_length, logging_steps=1, save_strategy="no",
        report_to=[], use_cpu=True, seed=0, bf16=False, fp16=False, completion_only_loss=not args.all_tokens, packing=False,
        gradient_checkpointing=args.gradient_checkpointing, dataloader_num_workers=0, shuffle_dataset=True,
    )
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, bias="none", task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=lora, callbacks=[timer])
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    trainer.train()
    adapter = os.path.join(args.out, "adapter")
    trainer.model.save_pretrained(adapter)
    print(json.dumps({
        "framework": "trl", "load_s": round(loaded, 2), "steps": len(timer.seconds), "step_seconds": timer.seconds,
        "step_cpu_seconds": timer.cpu_seconds,
        "losses": timer.losses, "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "adapter": adapter, "trainable_parameters": trainable, "total_s": round(time.perf_counter() - started, 2)}))


if __name__ == "__main__":
    main()
