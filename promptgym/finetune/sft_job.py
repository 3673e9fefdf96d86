"""A prepared SFT job: the base model with fresh LoRA adapters, its tokenizer, and the checked, encoded rows.

    job = SFTJob.prepare(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"))
    job.total_steps, job.measure_step_seconds()      # what a preview shows
    result = run_sft(job, "runs/dates-sft")           # promptgym.finetune.sft_run: the trainer

The job holds the model and the data and answers questions about them (a batch's loss, the steps of an
epoch, the validation loss); the trainer (:class:`promptgym.finetune.sft_run.SFTRun`) owns the optimiser
step, the loop, checkpoints and the finish.
"""

from __future__ import annotations

import gc
import math
import time
from typing import Any

from promptgym.finetune.auto_epochs import MAX_EPOCHS
from promptgym.finetune.base_model import BaseModelError, BaseModelSource, load_base_model, resolve_base_model
from promptgym.finetune.batches import Batch, batches_of, collate, epoch_order
from promptgym.finetune.device import DevicePlan, plan_device, to_device
from promptgym.finetune.lora import add_lora, parameter_counts
from promptgym.finetune.loss import sft_loss
from promptgym.finetune.replicas import SingleProcess
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_data import SFTData, prepare_sft_data

__all__ = ["SFTJob"]


class SFTJob:
    """A prepared SFT job: base model with fresh adapters, checked and encoded data."""

    def __init__(self, settings: SFTSettings, source: BaseModelSource, model: Any, tokenizer: Any, data: SFTData,
                 seed: int, name: str, plan: DevicePlan | None = None) -> None:
        self.settings, self.source, self.model, self.tokenizer, self.data = settings, source, model, tokenizer, data
        self.seed, self.name = seed, name
        self.plan = plan or DevicePlan(device="cpu", compute="fp32")
        self.trainable_parameters, self.total_parameters = parameter_counts(model)
        self.replicas: Any = SingleProcess()  # a Ray Train worker sets its data-parallel copy here

    @classmethod
    def prepare(cls, settings: SFTSettings, seed: int | None = None, name: str = "sft") -> "SFTJob":
        """Load the base model, check every row (raises ChatDataError), add the adapters."""
        seed = settings.seed if settings.seed is not None else (seed or 0)
        plan = plan_device(settings.device, settings.precision)  # a device the machine lacks fails before any loading
        source = resolve_base_model(settings.base_model)
        if settings.export.merged == "none" and source.gguf is None:
            raise BaseModelError(f"export.merged = 'none' keeps only the adapter, which llama.cpp applies to a GGUF base; "
                                 f"base_model {settings.base_model!r} has none: export a merged model (q8_0 or f16)")
        model, tokenizer = load_base_model(source, gradient_checkpointing=settings.gradient_checkpointing, plan=plan)
        data = prepare_sft_data(settings, tokenizer)
        return cls(settings, source, add_lora(model, settings.lora, seed), tokenizer, data, seed, name, plan)

    @property
    def shares_prefix(self) -> bool:
        """Whether batches encode their common prefix once (activation checkpointing can't keep a shared cache)."""
        wanted = self.settings.share_prefix
        return (not self.plan.is_cuda if wanted == "auto" else wanted) and not self.settings.gradient_checkpointing

    def loss(self, batch: Batch) -> tuple[Any, int]:
        """``(sum of token losses, trained tokens)`` of a batch, on the plan's device and in its formats."""
        return self.model_loss(self.model, batch.input_ids, batch.attention_mask, batch.labels)

    def model_loss(self, model: Any, input_ids: Any, attention_mask: Any, labels: Any) -> tuple[Any, int]:
        """The same, for ``model`` (a data-parallel wrapper's own copy on a Ray worker)."""
        input_ids, attention_mask, labels = to_device(self.plan, input_ids, attention_mask, labels)
        with self.plan.autocast():
            return sft_loss(model, input_ids, attention_mask, labels, self.settings.loss_chunk_size, self.shares_prefix)

    # -- sizes ----------------------------------------------------------------------------

    def step_groups(self, epoch: int) -> list[list[list[int]]]:
        """The optimiser steps of one epoch, each a list of micro-batches (lists of row indices)."""
        micro = batches_of(epoch_order(len(self.data.train), self.seed, epoch), self.settings.batch_size)
        return batches_of(micro, self.settings.gradient_accumulation_steps)  # type: ignore[arg-type]

    @property
    def steps_per_epoch(self) -> int:
        micro = math.ceil(len(self.data.train) / self.settings.batch_size)
        return math.ceil(micro / self.settings.gradient_accumulation_steps)

    @property
    def total_steps(self) -> int:
        """Optimiser steps of the run: ``n_epochs`` epochs, or ``max_steps`` when that ends sooner (with
        ``n_epochs="auto"``, before its plan: the most a plan may choose)."""
        epochs = self.settings.n_epochs
        steps = self.steps_per_epoch * (MAX_EPOCHS if epochs == "auto" else epochs)
        return steps if self.settings.max_steps is None else min(steps, self.settings.max_steps)

    def measure_step_seconds(self) -> float:
        """Time one forward+backward pass on the first batch; no weight, RNG or optimiser state changes."""
        import torch  # deferred: heavy, loaded when a job runs

        rng = torch.get_rng_state()
        batch = collate([self.data.train[i] for i in self.step_groups(0)[0][0]], self.tokenizer.pad_token_id)
        self.model.train()

        def forward_backward() -> None:
            loss_sum, count = self.loss(batch)
            (loss_sum / max(count, 1)).backward()
            if self.plan.is_cuda:
                torch.cuda.synchronize(self.plan.device)

        if self.plan.is_cuda:  # the first CUDA step compiles and allocates: warm up once, then time
            forward_backward()
            self.model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        forward_backward()
        seconds = time.perf_counter() - started
        self.model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
        return seconds * self.settings.gradient_accumulation_steps

    # -- evaluation -----------------------------------------------------------------------

    def evaluate(self) -> float | None:
        """Mean loss per trained token over the validation rows (None without validation rows)."""
        import torch  # deferred: heavy, loaded when a job runs

        if not self.data.validation:
            return None
        self.model.eval()
        total, count = 0.0, 0
        batches = batches_of(list(range(len(self.data.validation))), self.settings.batch_size)
        with torch.no_grad():
            for indices in batches[self.replicas.rank::self.replicas.world_size]:
                loss_sum, tokens = self.loss(collate([self.data.validation[i] for i in indices], self.tokenizer.pad_token_id))
                total, count = total + float(loss_sum), count + tokens
        self.model.train()
        total, count = self.replicas.sum([total, count])
        return total / count if count else None

    def release(self) -> None:
        """Drop the model from memory (before an export, which loads the weights afresh)."""
        self.model = None
        gc.collect()
