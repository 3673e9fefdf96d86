"""Supervised fine-tuning with LoRA on a CPU: chat JSONL in, a ``local/<name>`` model out.

    result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"),
                 output_dir="runs/dates-sft")
    LanguageModel(model=result.model_id)

In two phases when you want a preview first (the CLI does): ``job = SFTJob.prepare(settings)`` loads the
base model, checks and encodes every row and adds the adapters; ``job.measure_step_seconds()`` times one
step; ``job.run(output_dir)`` trains, checkpoints, exports GGUF files and registers the model.

``backend=RayTrainBackend(num_workers=2)`` (``promptgym.distributed``) runs the training part on Ray
Train's workers (the same loop, data parallel); the preparation and the finish stay in this process.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from promptgym.core.events import Event, SFTEval, SFTStarted, SFTStep
from promptgym.finetune.base_model import BaseModelError, BaseModelSource, load_base_model, resolve_base_model
from promptgym.finetune.batches import Batch, batches_of, collate, epoch_order
from promptgym.finetune.checkpoint import Progress, TrainingParts, last_checkpoint, read_adapter, read_progress
from promptgym.finetune.device import DevicePlan, is_out_of_memory, plan_device, to_device
from promptgym.finetune.history import plot_losses
from promptgym.finetune.lora import add_lora, load_adapter_state, parameter_counts
from promptgym.finetune.loop import EventSink, StopRequest, TrainingInterrupted, ignore_event
from promptgym.finetune.loss import sft_loss
from promptgym.finetune.replicas import SingleProcess
from promptgym.finetune.samples import sample_answers
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_data import SFTData, prepare_sft_data
from promptgym.finetune.sft_finish import summary_markdown
from promptgym.finetune.weight_run import StatusSink, WeightRun, WeightRunResult, default_model_name

__all__ = ["SFTJob", "SFTResult", "SFTRun", "TrainingBackend", "TrainingInterrupted", "default_model_name", "sft"]


@dataclass(kw_only=True)
class SFTResult(WeightRunResult):
    """What a finished (or stopped) run left: the model id, losses, checkpoints and files."""

    steps: int
    final_loss: float | None
    final_eval_loss: float | None
    initial_eval_loss: float | None
    device: str = "cpu"

    def status_fields(self) -> dict[str, Any]:
        data = asdict(self)
        data["output_dir"] = str(self.output_dir)
        return data


class TrainingBackend(Protocol):
    """Where an SFT job's loop runs instead of this process: ``promptgym.distributed.RayTrainBackend``."""

    def train(self, job: SFTJob, folder: Path, on_event: EventSink, status: StatusSink, resume: bool,
              stop: StopRequest, started: float) -> Any: ...


def _round(value: float | None, digits: int = 5) -> float | None:
    return None if value is None else round(float(value), digits)


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
        return self.steps_per_epoch * self.settings.n_epochs

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

    # -- training -------------------------------------------------------------------------

    def _train_step(self, groups: list[list[int]], training: TrainingParts, forward: Any) -> dict[str, Any]:
        import torch  # deferred: heavy, loaded when a job runs

        started = time.perf_counter()
        replicas, pad = self.replicas, self.tokenizer.pad_token_id
        batches = [collate([self.data.train[i] for i in indices], pad) for indices in groups]
        trained = sum(batch.trained_tokens for batch in batches)  # of the whole step, over every copy
        total = 0.0
        for position, indices in enumerate(groups):
            mine = replicas.shard(indices)
            # a copy without rows in this micro-batch still joins the gradient all-reduce, with weight 0
            batch = batches[position] if len(mine) == len(indices) else collate([self.data.train[i] for i in mine or indices[:1]], pad)
            with replicas.accumulating(forward, last=position == len(groups) - 1):
                loss_sum = forward(batch.input_ids, batch.attention_mask, batch.labels)
                # DDP averages the copies' gradients: scaled by their number, the average is the gradient of the
                # step's mean token loss, exactly as one process computes it
                ((loss_sum * replicas.world_size if mine else loss_sum * 0.0) / max(trained, 1)).backward()
            total += float(loss_sum.detach()) if mine else 0.0
        total = replicas.sum([total])[0]
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        clip = self.settings.max_grad_norm or float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(parameters, clip))
        lr = training.scheduler.get_last_lr()[0]
        training.optimizer.step()
        training.scheduler.step()
        training.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - started
        return {"loss": total / max(trained, 1), "lr": lr, "grad_norm": grad_norm, "seconds": seconds,
                "tokens_per_s": sum(batch.tokens for batch in batches) / seconds if seconds > 0 else None}

    def run(self, output_dir: str | Path, on_event: EventSink = ignore_event, status: StatusSink | None = None,
            resume: bool = False, stop: StopRequest | None = None, backend: TrainingBackend | None = None) -> SFTResult:
        """Train (continuing from the last checkpoint when ``resume``), then export and register the model.

        ``status`` is a callable taking keyword changes to the run's status (default: ``output_dir/run.json``).
        ``backend`` (e.g. ``promptgym.distributed.RayTrainBackend``) trains elsewhere; None trains here.
        Raises TrainingInterrupted, after a checkpoint, when ``stop`` is requested.
        """
        run = SFTRun(self, output_dir, on_event, status, stop, replicas=self.replicas)
        if backend is None:
            return run.run(resume)
        backend.train(self, run.folder, on_event=on_event, status=run.status, resume=resume, stop=run.stop,
                      started=run.started)
        checkpoint = last_checkpoint(run.folder / "checkpoints")
        load_adapter_state(self.model, read_adapter(checkpoint))  # what the workers trained, for samples and export
        return run.finish(read_progress(checkpoint))

    def finish(self, output_dir: str | Path, progress: Progress, on_event: EventSink = ignore_event,
               status: StatusSink | None = None) -> SFTResult:
        """Export, register and summarise a run whose training ended at ``progress`` (its last checkpoint)."""
        return SFTRun(self, output_dir, on_event, status).finish(progress)

    def model_id(self, folder: Path) -> str:
        return f"local/{self.settings.model_name or default_model_name(self.name, folder)}"

    def train(self, folder: Path, on_event: EventSink, status: StatusSink, resume: bool, stop: StopRequest,
              started: float) -> Progress:
        """The training loop, on this copy of the model (``self.replicas``); returns where it ended.

        Every copy runs it; only the main one writes history and checkpoints and sends events and status.
        ``started`` is the session's start (wall clock), for the elapsed time kept in checkpoints.
        """
        return SFTRun(self, folder, on_event, status, stop, started, self.replicas).train(resume)

    def release(self) -> None:
        """Drop the model from memory (before an export, which loads the weights afresh)."""
        self.model = None
        gc.collect()


class SFTRun(WeightRun):
    """One session of an SFT run on the skeleton: the epochs of optimiser steps, the evaluations, the summary."""

    method = "sft"
    job: SFTJob
    samples: list[dict[str, str]] = []  # the summary's sample answers, made before the model is released

    def started_event(self, resume: bool) -> Event:
        job = self.job
        return SFTStarted(
            base_model=self.settings.base_model, train_rows=len(job.data.train), validation_rows=len(job.data.validation),
            skipped_rows=len(job.data.skipped), epochs=self.settings.n_epochs, steps=job.total_steps,
            steps_per_epoch=job.steps_per_epoch, trainable_parameters=job.trainable_parameters,
            resume_from_step=self.progress.step if resume else None)

    def checkpoint_entry(self) -> dict[str, Any]:
        return {"step": self.progress.step, "loss": _round(self.progress.loss), **super().checkpoint_entry()}

    def train_steps(self) -> None:
        job, progress, extra = self.job, self.progress, self.progress.extra
        forward = self.replicas.loss_function(job.model, job.model_loss)
        if "initial_eval_loss" not in extra:
            extra["initial_eval_loss"] = _round(job.evaluate())
            self._emit_eval(extra["initial_eval_loss"], "before")
        job.model.train()
        for epoch in range(progress.epoch, self.settings.n_epochs):
            groups = job.step_groups(epoch)
            first = progress.batch_in_epoch if epoch == progress.epoch else 0
            for position in range(first, len(groups)):
                self._step(groups[position], epoch, (position + 1) / len(groups), forward)
                progress.batch_in_epoch = position + 1
                self.stop_if_requested()
                self.save_if_due()
            progress.epoch, progress.batch_in_epoch = epoch + 1, 0
        if "final_eval_loss" not in extra:
            extra["final_eval_loss"] = _round(job.evaluate())
            self._emit_eval(extra["final_eval_loss"], "final")

    def _step(self, groups: list[list[int]], epoch: int, fraction: float, forward: Any) -> None:
        """One optimiser step (its micro-batches ``groups``), its history row and events."""
        job, progress = self.job, self.progress
        assert self.training is not None
        try:
            measured = job._train_step(groups, self.training, forward)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            rows = [job.data.train[i] for indices in groups for i in indices]
            longest = max(len(row.input_ids) for row in rows)
            raise self.out_of_memory(len(rows) // max(len(groups), 1), longest) from error
        progress.step, progress.epoch, progress.loss = progress.step + 1, epoch, measured["loss"]
        row = {"step": progress.step, "epoch": epoch + fraction, "loss": _round(measured["loss"]),
               "lr": measured["lr"], "tokens_per_s": _round(measured["tokens_per_s"], 1),
               "grad_norm": _round(measured["grad_norm"], 4), "seconds": _round(measured["seconds"], 3),
               "elapsed_s": round(self.elapsed, 2)}
        eval_due = self.settings.eval_steps and progress.step % self.settings.eval_steps == 0
        if eval_due and progress.step < job.total_steps:
            row["eval_loss"] = _round(job.evaluate())
        self.record(row)
        self.on_event(SFTStep(total_steps=job.total_steps, **row))
        if row.get("eval_loss") is not None:
            self.on_event(SFTEval(step=progress.step, eval_loss=row["eval_loss"], label="step"))

    def _emit_eval(self, loss: float | None, label: str) -> None:
        if loss is None:
            return
        self.record({"step": self.progress.step, "eval_loss": loss})
        self.on_event(SFTEval(step=self.progress.step, eval_loss=loss, label=label))

    # -- the finish -------------------------------------------------------------------------

    def before_release(self) -> dict[str, str]:
        job = self.job
        rows = job.data.validation_rows or job.data.train_rows
        prompts = [row.messages for row in rows[:self.settings.summary_samples]]
        self.samples = sample_answers(job.model, job.tokenizer, prompts)
        plot = plot_losses(self.history.rows(), self.folder / "plots" / "loss.png",
                           title=f"{self.settings.base_model} SFT")
        return {"loss_plot": str(plot)} if plot else {}

    def registry_details(self) -> dict[str, Any]:
        return {"train_file": self.settings.train_file, "train_rows": len(self.job.data.train),
                "steps": self.progress.step,
                "final_eval_loss": self.progress.extra.get("final_eval_loss"), "lora_r": self.settings.lora.r}

    def result(self, **base: Any) -> SFTResult:
        extra = self.progress.extra
        return SFTResult(**base, steps=self.progress.step, final_loss=self.progress.loss,
                         final_eval_loss=extra.get("final_eval_loss"), initial_eval_loss=extra.get("initial_eval_loss"),
                         device=self.job.plan.device)

    def summary_markdown(self, result: SFTResult) -> str:
        return summary_markdown(self.job, result, self.samples)

    def finished_status(self, result: SFTResult) -> dict[str, Any]:
        fields = {key: value for key, value in result.status_fields().items() if key != "output_dir"}
        return {**fields, "samples": self.samples}


def sft(settings: SFTSettings, output_dir: str | Path, name: str = "sft", seed: int | None = None,
        on_event: EventSink = ignore_event, resume: bool = False, stop: StopRequest | None = None,
        backend: TrainingBackend | None = None) -> SFTResult:
    """Fine-tune ``settings.base_model`` on ``settings.train_file``; the result's ``model_id`` is a model string.

    ``backend``: None trains in this process; ``RayTrainBackend(num_workers=2)`` on Ray Train's CPU workers.

    >>> result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"), "out")  # doctest: +SKIP
    >>> LanguageModel(model=result.model_id)  # doctest: +SKIP
    >>> from promptgym.distributed import RayTrainBackend
    >>> result = sft(settings, "out-ray", backend=RayTrainBackend(num_workers=2))  # doctest: +SKIP
    """
    job = SFTJob.prepare(settings, seed=seed, name=name)
    return job.run(output_dir, on_event=on_event, resume=resume, stop=stop, backend=backend)

