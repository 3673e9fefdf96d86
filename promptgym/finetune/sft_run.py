"""Supervised fine-tuning with LoRA on a CPU: chat JSONL in, a ``local/<name>`` model out.

    result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"),
                 output_dir="runs/dates-sft")
    LanguageModel(model=result.model_id)

In two phases when you want a preview first (the CLI does): ``job = SFTJob.prepare(settings)``
(:mod:`promptgym.finetune.sft_job`) loads the base model, checks and encodes every row and adds the adapters;
``job.measure_step_seconds()`` times one step; ``run_sft(job, output_dir)`` trains, checkpoints, exports GGUF
files and registers the model. The trainer, :class:`SFTRun`, owns its optimiser step; the job holds the model
and the data.

``executor=RayTrainExecutor(num_workers=2)`` (``promptgym.distributed``) runs the training part on Ray
Train's workers (the same loop, data parallel); the preparation and the finish stay in this process.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

from promptgym.core.deprecation import renamed_keyword, renamed_names
from promptgym.core.events import Event, SFTEval, SFTStarted, SFTStep
from promptgym.finetune.batches import collate
from promptgym.finetune.checkpoint import last_checkpoint, read_adapter, read_progress
from promptgym.finetune.device import is_out_of_memory
from promptgym.finetune.history import plot_losses
from promptgym.finetune.lora import load_adapter_state
from promptgym.finetune.loop import EventSink, ignore_event
from promptgym.finetune.samples import sample_answers
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_finish import SFTResult, summary_markdown
from promptgym.finetune.sft_job import SFTJob
from promptgym.finetune.weight_run import StatusSink, WeightRun, default_model_name
from promptgym.runs.stop import StopRequest, TrainingInterrupted

__all__ = ["SFTJob", "SFTResult", "SFTRun", "TrainingExecutor", "TrainingInterrupted", "default_model_name",
           "run_sft", "sft"]


class TrainingExecutor(Protocol):
    """Where an SFT job's loop runs instead of this process: ``promptgym.distributed.RayTrainExecutor``."""

    def train(self, job: SFTJob, folder: Path, on_event: EventSink, status: StatusSink, resume: bool,
              stop: StopRequest, started: float) -> Any: ...


def _round(value: float | None, digits: int = 5) -> float | None:
    return None if value is None else round(float(value), digits)


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
        try:
            measured = self.optimizer_step(groups, forward)
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

    def optimizer_step(self, groups: list[list[int]], forward: Any) -> dict[str, Any]:
        """One optimiser step over the micro-batches ``groups`` (row indices): gradients accumulated over them
        (and over the data-parallel copies), clipped, applied; returns what the history row shows."""
        import torch  # deferred: heavy, loaded when a job runs

        job, training = self.job, self.training
        assert training is not None, "begin() first"

        started = time.perf_counter()
        replicas, pad = self.replicas, job.tokenizer.pad_token_id
        batches = [collate([job.data.train[i] for i in indices], pad) for indices in groups]
        trained = sum(batch.trained_tokens for batch in batches)  # of the whole step, over every copy
        total = 0.0
        for position, indices in enumerate(groups):
            mine = replicas.shard(indices)
            # a copy without rows in this micro-batch still joins the gradient all-reduce, with weight 0
            batch = batches[position] if len(mine) == len(indices) else collate([job.data.train[i] for i in mine or indices[:1]], pad)
            with replicas.accumulating(forward, last=position == len(groups) - 1):
                loss_sum = forward(batch.input_ids, batch.attention_mask, batch.labels)
                # DDP averages the copies' gradients: scaled by their number, the average is the gradient of the
                # step's mean token loss, exactly as one process computes it
                ((loss_sum * replicas.world_size if mine else loss_sum * 0.0) / max(trained, 1)).backward()
            total += float(loss_sum.detach()) if mine else 0.0
        total = replicas.sum([total])[0]
        parameters = [p for p in job.model.parameters() if p.requires_grad]
        clip = self.settings.max_grad_norm or float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(parameters, clip))
        lr = training.scheduler.get_last_lr()[0]
        training.optimizer.step()
        training.scheduler.step()
        training.optimizer.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - started
        return {"loss": total / max(trained, 1), "lr": lr, "grad_norm": grad_norm, "seconds": seconds,
                "tokens_per_s": sum(batch.tokens for batch in batches) / seconds if seconds > 0 else None}

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


def run_sft(job: SFTJob, output_dir: str | Path, on_event: EventSink = ignore_event, status: StatusSink | None = None,
            resume: bool = False, stop: StopRequest | None = None, executor: TrainingExecutor | None = None,
            backend: TrainingExecutor | None = None) -> SFTResult:
    """Train ``job`` (continuing from the last checkpoint when ``resume``), then export and register the model.

    ``status`` is a callable taking keyword changes to the run's status (default: ``output_dir/run.json``).
    ``executor`` (e.g. ``promptgym.distributed.RayTrainExecutor``) trains elsewhere; None trains here.
    ``backend`` is its deprecated name. Raises TrainingInterrupted, after a checkpoint, when ``stop`` is requested.
    """
    executor = renamed_keyword("run_sft", "backend", backend, "executor", executor)
    run = SFTRun(job, output_dir, on_event, status, stop, replicas=job.replicas)
    if executor is None:
        return run.run(resume)
    executor.train(job, run.folder, on_event=on_event, status=run.status, resume=resume, stop=run.stop,
                   started=run.started)
    checkpoint = last_checkpoint(run.folder / "checkpoints")
    load_adapter_state(job.model, read_adapter(checkpoint))  # what the workers trained, for samples and export
    return run.finish(read_progress(checkpoint))


def sft(settings: SFTSettings, output_dir: str | Path, name: str = "sft", seed: int | None = None,
        on_event: EventSink = ignore_event, resume: bool = False, stop: StopRequest | None = None,
        executor: TrainingExecutor | None = None, backend: TrainingExecutor | None = None) -> SFTResult:
    """Fine-tune ``settings.base_model`` on ``settings.train_file``; the result's ``model_id`` is a model string.

    ``executor``: None trains in this process; ``RayTrainExecutor(num_workers=2)`` on Ray Train's CPU workers
    (``backend``: its deprecated name).

    >>> result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"), "out")  # doctest: +SKIP
    >>> LanguageModel(model=result.model_id)  # doctest: +SKIP
    >>> from promptgym.distributed import RayTrainExecutor
    >>> result = sft(settings, "out-ray", executor=RayTrainExecutor(num_workers=2))  # doctest: +SKIP
    """
    executor = renamed_keyword("sft", "backend", backend, "executor", executor)
    job = SFTJob.prepare(settings, seed=seed, name=name)
    return run_sft(job, output_dir, on_event=on_event, resume=resume, stop=stop, executor=executor)


__getattr__ = renamed_names(__name__, {"TrainingBackend": "TrainingExecutor"}, globals())

