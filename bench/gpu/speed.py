"""Weight-training speed: promptgym's SFT step and RL iteration vs plain transformers + peft and TRL, on one device.

The embedded models' architectures are built from their configs with random weights (a step's time does not
depend on the values), so nothing is downloaded or carried but code; the token ids are synthetic. Prints one
JSON line per row (and writes them to ``--out``):

- ``sft``: promptgym's SFT loop (``SFTRun.train``: LoRA r 16 on the 7 projections, chunked loss, the device
  plan's formats) against a plain transformers + peft step (full logits, ``model(..., labels=...)``, AdamW,
  the same formats) on the same batches. ``rows = "program"``: rows that share a system message (most of each
  row, as in a program's own SFT data; promptgym encodes it once per batch), ``rows = "distinct"``: rows with
  nothing in common. Tokens/s counts the batch's tokens (training data per second) for both.
- ``rl``: one GRPO iteration (``--seeds`` prompts x group 8, 64 new tokens, then the update): promptgym's
  batched sampler and update against TRL's ``GRPOTrainer`` step (generation + update) when ``trl`` imports.

    python bench/gpu/speed.py --device cuda --out gpu.jsonl              # the GPU rows (bench/gpu/run.sh)
    python bench/gpu/speed.py --device cpu --batches 8 --steps 2 --skip-rl  # the same rows on this machine
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from promptgym.finetune.base_model import BaseModelSource
from promptgym.finetune.batches import collate
from promptgym.finetune.checkpoint import TrainingParts
from promptgym.finetune.device import DevicePlan, plan_device
from promptgym.finetune.encoding import IGNORE_INDEX, EncodedConversation
from promptgym.finetune.lora import add_lora
from promptgym.finetune.loop import StopRequest, make_optimizer
from promptgym.finetune.rl.sampler import sample
from promptgym.finetune.rl.settings import RLSettings
from promptgym.finetune.rl.update import TrainingRow, grpo_update
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_data import SFTData
from promptgym.finetune.sft_run import SFTJob, SFTRun

# Qwen2.5-0.5B-Instruct's architecture (the embedded default, local/qwen2.5-coder-0.5b-instruct), written out so
# that nothing is read from a hub or a model file.
QWEN_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1000000.0,
                rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151645)
TINY = dict(QWEN_05B, vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def emit(row: dict[str, Any], out: Path | None) -> None:
    line = json.dumps(row)
    print(line, flush=True)
    if out is not None:
        with out.open("a") as handle:
            handle.write(line + "\n")


def random_model(architecture: dict[str, Any], plan: DevicePlan, seed: int = 0) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(**architecture)
    with torch.device(plan.device):
        model = Qwen2ForCausalLM(config).to(plan.weight_dtype)
    model.config.use_cache = False
    return model


def with_lora(model: Any) -> Any:
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=TARGETS,
                                            bias="none", task_type="CAUSAL_LM"))


def make_rows(count: int, length: int, vocab: int, shared: int, answer: int, seed: int) -> list[EncodedConversation]:
    """``count`` rows of ``length`` tokens: the first ``shared`` the same in every row, the last ``answer`` trained."""
    generator = torch.Generator().manual_seed(seed)
    prefix = torch.randint(100, vocab - 100, (shared,), generator=generator).tolist()
    rows = []
    for _ in range(count):
        ids = prefix + torch.randint(100, vocab - 100, (length - shared,), generator=generator).tolist()
        rows.append(EncodedConversation(input_ids=ids, labels=[IGNORE_INDEX] * (length - answer) + ids[-answer:]))
    return rows


def synchronize(plan: DevicePlan) -> None:
    if plan.is_cuda:
        torch.cuda.synchronize(plan.device)


@contextlib.contextmanager
def measured_memory(plan: DevicePlan, into: dict[str, Any]) -> Iterator[None]:
    if plan.is_cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(plan.device)
    yield
    if plan.is_cuda:
        into["peak_gib"] = round(torch.cuda.max_memory_allocated(plan.device) / 2 ** 30, 2)


class _PadOnly:
    """All the SFT loop asks of a tokenizer: its padding id."""

    pad_token_id = 0


def promptgym_sft(architecture: dict[str, Any], plan: DevicePlan, rows: list[EncodedConversation], batch: int,
                  steps: int, share_prefix: bool | str) -> dict[str, Any]:
    """promptgym's own loop (``SFTRun.train``) on ``rows``; seconds per step after one warm-up step."""
    result: dict[str, Any] = {}
    with measured_memory(plan, result):
        settings = SFTSettings(base_model="random", train_file="-", batch_size=batch, n_epochs=1, save_steps=10 ** 6,
                               device=plan.device, precision=plan.compute, share_prefix=share_prefix, seed=0)
        model = add_lora(random_model(architecture, plan), settings.lora, seed=0)
        data = SFTData(train=rows[:batch * (steps + 1)], validation=[], train_rows=[], validation_rows=[])
        job = SFTJob(settings, BaseModelSource("random", None, Path("."), ""), model, _PadOnly(), data, 0, "bench", plan)
        marks: list[float] = []

        def on_event(event: Any) -> None:
            if event.kind == "sft_step":
                synchronize(plan)
                marks.append(time.perf_counter())

        with tempfile.TemporaryDirectory() as folder:
            synchronize(plan)
            marks.append(time.perf_counter())
            SFTRun(job, Path(folder), on_event, lambda **_: None, StopRequest(), time.time(), job.replicas).train(False)
    seconds = [b - a for a, b in zip(marks, marks[1:])][1:]  # the first step warms up kernels and allocator
    tokens = sum(len(row.input_ids) for row in rows[:batch])
    step = statistics.median(seconds)
    return {**result, "step_s": round(step, 4), "tokens_per_s": round(tokens / step, 1)}


def profile_step(architecture: dict[str, Any], plan: DevicePlan, rows: list[EncodedConversation], batch: int,
                 out: Path) -> None:
    """torch.profiler's table of one promptgym step and one plain step (after warm-ups), to find where time goes."""
    from torch.profiler import ProfilerActivity, profile

    settings = SFTSettings(base_model="random", train_file="-", batch_size=batch, device=plan.device,
                           precision=plan.compute, seed=0)
    model = add_lora(random_model(architecture, plan), settings.lora, seed=0)
    job = SFTJob(settings, BaseModelSource("random", None, Path("."), ""), model, _PadOnly(),
                 SFTData(train=rows[:batch], validation=[], train_rows=[], validation_rows=[]), 0, "profile", plan)
    optimizer, scheduler = make_optimizer(model, settings, 100)
    scratch = tempfile.TemporaryDirectory()
    trainer = SFTRun(job, scratch.name)  # the trainer owns the step; its folder is never written here
    trainer.training = training = TrainingParts(model, optimizer, scheduler)
    forward = job.replicas.loss_function(model, job.model_loss)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if plan.is_cuda else [])
    sort = "cuda_time_total" if plan.is_cuda else "cpu_time_total"
    for _ in range(2):
        trainer.optimizer_step([list(range(batch))], forward)
    synchronize(plan)
    with profile(activities=activities) as ours:
        trainer.optimizer_step([list(range(batch))], forward)
        synchronize(plan)
    scratch.cleanup()
    del job, trainer, model, optimizer, training, forward
    plain_step = PlainStep(architecture, plan)
    for _ in range(2):
        plain_step(rows[:batch])
    synchronize(plan)
    with profile(activities=activities) as plain:
        plain_step(rows[:batch])
        synchronize(plan)
    with out.open("a") as handle:
        for name, measured in (("promptgym", ours), ("plain transformers + peft", plain)):
            handle.write(f"== {name} step, batch {batch}\n{measured.key_averages().table(sort_by=sort, row_limit=25)}\n")


class PlainStep:
    """The reference: transformers + peft as their docs show (full logits, ``labels=``), the plan's formats."""

    def __init__(self, architecture: dict[str, Any], plan: DevicePlan) -> None:
        self.plan, self.model = plan, with_lora(random_model(architecture, plan))
        self.model.train()
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.trainable, lr=2e-4)

    def __call__(self, rows: list[EncodedConversation]) -> None:
        tensors = collate(rows, 0)
        input_ids, attention_mask, labels = (t.to(self.plan.device) for t in
                                             (tensors.input_ids, tensors.attention_mask, tensors.labels))
        with self.plan.autocast():
            loss = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.trainable, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def plain_sft(architecture: dict[str, Any], plan: DevicePlan, rows: list[EncodedConversation], batch: int,
              steps: int) -> dict[str, Any]:
    """:class:`PlainStep` on the same batches as promptgym's loop; seconds per step after one warm-up step."""
    result: dict[str, Any] = {}
    with measured_memory(plan, result):
        step_once = PlainStep(architecture, plan)
        seconds = []
        for step in range(steps + 1):
            synchronize(plan)
            started = time.perf_counter()
            step_once(rows[step * batch:(step + 1) * batch])
            synchronize(plan)
            seconds.append(time.perf_counter() - started)
    step = statistics.median(seconds[1:])
    tokens = sum(len(row.input_ids) for row in rows[:batch])
    return {**result, "step_s": round(step, 4), "tokens_per_s": round(tokens / step, 1)}


def sft_rows(args: argparse.Namespace, architecture: dict[str, Any], plan: DevicePlan, out: Path | None) -> None:
    vocab = architecture["vocab_size"]
    for batch in args.batches:
        for kind, shared in (("program", int(args.length * 0.7)), ("distinct", 0)):
            rows = make_rows(batch * (args.steps + 1), args.length, vocab, shared, args.answer, seed=batch)
            ours = guarded(lambda: promptgym_sft(architecture, plan, rows, batch, args.steps, share_prefix="auto"))
            reference = guarded(lambda: plain_sft(architecture, plan, rows, batch, args.steps))
            row = {"bench": "sft", "device": plan.describe(), "rows": kind, "batch": batch, "length": args.length,
                   "promptgym": ours, "plain_transformers_peft": reference}
            if "tokens_per_s" in ours and "tokens_per_s" in reference:
                row["ratio_tokens_per_s"] = round(ours["tokens_per_s"] / reference["tokens_per_s"], 3)
            emit(row, out)


def guarded(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A failed measurement is a row with its error, never the end of the script."""
    try:
        return measure()
    except Exception as error:  # noqa: BLE001 - reported in the row
        return {"error": f"{type(error).__name__}: {str(error)[:300]}"}
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def promptgym_rl(architecture: dict[str, Any], plan: DevicePlan, prompts: list[list[int]], group: int,
                 new_tokens: int, iterations: int) -> dict[str, Any]:
    """Sampling (the policy server's batched call) then the GRPO update, per iteration; after one warm-up."""

    result: dict[str, Any] = {}
    with measured_memory(plan, result):
        settings = RLSettings(base_model="random", group_size=group, batch_size=len(prompts), iterations=iterations + 1,
                              max_new_tokens=new_tokens, micro_batch_size=len(prompts) * group, device=plan.device,
                              precision=plan.compute)
        model = add_lora(random_model(architecture, plan), settings.lora, seed=0)
        optimizer, scheduler = make_optimizer(model, settings, settings.iterations)
        generator = torch.Generator(device=plan.device).manual_seed(0)
        timings = []
        for _ in range(iterations + 1):
            synchronize(plan)
            started = time.perf_counter()
            model.eval()
            with plan.autocast():
                drawn = sample(model, [prompt for prompt in prompts for _ in range(group)], [new_tokens] * len(prompts) * group,
                               1.0, stop_ids=set(), pad_id=0, generator=generator)
            sampled = time.perf_counter() - started
            rows = [TrainingRow(item.prompt_ids, item.completion_ids, item.logprobs, advantage=(-1.0) ** index)
                    for index, item in enumerate(drawn)]
            with plan.autocast():
                grpo_update(model, optimizer, scheduler, rows, settings, pad_id=0)
            synchronize(plan)
            timings.append((time.perf_counter() - started, sampled, sum(len(item.completion_ids) for item in drawn)))
    steady = timings[1:]
    total = statistics.median(t for t, _, _ in steady)
    return {**result, "iteration_s": round(total, 3), "sampling_s": round(statistics.median(s for _, s, _ in steady), 3),
            "completion_tokens": steady[-1][2], "sampled_tokens_per_s": round(steady[-1][2] / statistics.median(
                s for _, s, _ in steady), 1)}


def word_tokenizer(vocab: int) -> Any:
    """A tokenizer with one word per id (``t0`` ... ``tN``): TRL needs one, and no tokenizer file may be read."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="t0", pad_token="t0", eos_token="t1",
                                   bos_token=None)


def trl_rl(architecture: dict[str, Any], plan: DevicePlan, prompts: list[list[int]], group: int, new_tokens: int,
           iterations: int) -> dict[str, Any]:
    """TRL's GRPOTrainer, same model, LoRA, batch and lengths; seconds per step (generation + update)."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.begin = 0.0

        def on_step_begin(self, *_: Any, **__: Any) -> None:
            synchronize(plan)
            self.begin = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            synchronize(plan)
            self.seconds.append(time.perf_counter() - self.begin)

    result: dict[str, Any] = {}
    with measured_memory(plan, result), tempfile.TemporaryDirectory() as folder:
        model = random_model(architecture, plan)
        tokenizer = word_tokenizer(architecture["vocab_size"])
        dataset = Dataset.from_list([{"prompt": " ".join(f"t{i}" for i in prompt)} for prompt in prompts]
                                    * (iterations + 1))
        config = GRPOConfig(
            output_dir=folder, report_to=[], save_strategy="no", logging_steps=1, seed=0, use_cpu=not plan.is_cuda,
            bf16=plan.compute == "bf16", fp16=plan.compute == "fp16",
            per_device_train_batch_size=len(prompts) * group, gradient_accumulation_steps=1, num_generations=group,
            max_completion_length=new_tokens, temperature=1.0, learning_rate=5e-5, max_steps=iterations + 1, beta=0.0,
            num_iterations=1, shuffle_dataset=False, disable_dropout=True, dataloader_num_workers=0,
            gradient_checkpointing=False)
        timer = StepTimer()
        trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [float(len(c) % 7) for c in completions],
                              args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=[timer],
                              peft_config=LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS,
                                                     bias="none", task_type="CAUSAL_LM"))
        trainer.train()
        lengths = [entry.get("completions/mean_length") for entry in trainer.state.log_history
                   if "completions/mean_length" in entry]
    return {**result, "iteration_s": round(statistics.median(timer.seconds[1:]), 3),
            "mean_completion_length": lengths[-1] if lengths else None}


def rl_rows(args: argparse.Namespace, architecture: dict[str, Any], plan: DevicePlan, out: Path | None) -> None:
    generator = torch.Generator().manual_seed(1)
    vocab = architecture["vocab_size"]
    prompts = [torch.randint(100, vocab - 100, (args.prompt_length,), generator=generator).tolist()
               for _ in range(args.seeds)]
    ours = guarded(lambda: promptgym_rl(architecture, plan, prompts, args.group, args.new_tokens, args.rl_iterations))
    try:
        import trl  # noqa: F401 - optional: the peer of this row
    except Exception as error:  # noqa: BLE001 - a missing or broken peer is reported in the row
        reference = {"error": f"trl does not import here: {type(error).__name__}: {error}"}
    else:
        reference = guarded(lambda: trl_rl(architecture, plan, prompts, args.group, args.new_tokens, args.rl_iterations))
    row = {"bench": "rl", "device": plan.describe(), "seeds": args.seeds, "group": args.group,
           "new_tokens": args.new_tokens, "prompt_length": args.prompt_length, "promptgym": ours, "trl_grpo": reference}
    if "iteration_s" in ours and "iteration_s" in reference:
        row["ratio_iteration_s"] = round(ours["iteration_s"] / reference["iteration_s"], 3)
    emit(row, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--architecture", choices=["qwen2.5-0.5b", "tiny"], default="qwen2.5-0.5b")
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--answer", type=int, default=24, help="trained tokens at the end of each row")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (after one warm-up)")
    parser.add_argument("--seeds", type=int, default=4, help="RL: prompts per iteration")
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-length", type=int, default=128)
    parser.add_argument("--rl-iterations", type=int, default=2, help="timed iterations (after one warm-up)")
    parser.add_argument("--skip-sft", action="store_true")
    parser.add_argument("--skip-rl", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None, help="write torch.profiler tables of one step of each "
                        "(first --batches size, rows with nothing in common) to this file")
    args = parser.parse_args()
    plan = plan_device(args.device, args.precision)
    plan.prepare_torch()
    architecture = QWEN_05B if args.architecture == "qwen2.5-0.5b" else TINY
    emit({"bench": "environment", "device": plan.describe(), "torch": torch.__version__,
          "python": sys.version.split()[0], "architecture": args.architecture}, args.out)
    if args.profile is not None:
        rows = make_rows(args.batches[0], args.length, architecture["vocab_size"], 0, args.answer, seed=0)
        profile_step(architecture, plan, rows, args.batches[0], args.profile)
    if not args.skip_sft:
        sft_rows(args, architecture, plan, args.out)
    if not args.skip_rl:
        rl_rows(args, architecture, plan, args.out)


if __name__ == "__main__":
    main()
