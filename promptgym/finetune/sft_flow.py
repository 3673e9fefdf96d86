"""Supervised fine-tuning with LoRA on a CPU: chat JSONL in, a ``local/<name>`` model out.

    result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"),
                 output_dir="runs/dates-sft")
    LanguageModel(model=result.model_id)

In two phases when you want a preview first (the CLI does): ``job = SFTJob.prepare(settings)`` loads the
base model, checks and encodes every row and adds the adapters; ``job.measure_step_seconds()`` times one
step; ``job.run(output_dir)`` trains, checkpoints, exports GGUF files and registers the model.
"""

from __future__ import annotations

import gc
import hashlib
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from promptgym.core.events import CheckpointSaved, SFTEval, SFTStarted, SFTStep
from promptgym.finetune.base_model import BaseModelError, BaseModelSource, load_base_model, resolve_base_model
from promptgym.finetune.batches import batches_of, collate, epoch_order
from promptgym.finetune.checkpoint import Progress, TrainingState, checkpoint_name, load_checkpoint, save_checkpoint
from promptgym.finetune.history import StepHistory
from promptgym.finetune.lora import add_lora, parameter_counts
from promptgym.finetune.loop import (
    EventSink,
    JsonStatus,
    StopRequest,
    TrainingInterrupted,
    ignore_event,
    make_optimizer,
)
from promptgym.finetune.loss import chunked_causal_lm_loss
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_data import SFTData, prepare_sft_data


@dataclass
class SFTResult:
    """What a finished (or stopped) run left: the model id, losses, checkpoints and files."""

    status: str
    model_id: str | None
    output_dir: Path
    steps: int
    final_loss: float | None
    final_eval_loss: float | None
    initial_eval_loss: float | None
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    peak_rss_mb: float = 0.0

    def status_fields(self) -> dict[str, Any]:
        data = asdict(self)
        data["output_dir"] = str(self.output_dir)
        return data


def default_model_name(job_name: str, output_dir: Path) -> str:
    """``ft-<job name>-<6 hex of the output folder>``: stable across resumes of the same run."""
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in job_name.lower()).strip("-.")[:40] or "model"
    digest = hashlib.sha256(str(output_dir.resolve()).encode()).hexdigest()[:6]
    return f"ft-{slug}-{digest}"


def _round(value: float | None, digits: int = 5) -> float | None:
    return None if value is None else round(float(value), digits)


class SFTJob:
    """A prepared SFT job: base model with fresh adapters, checked and encoded data."""

    def __init__(self, settings: SFTSettings, source: BaseModelSource, model: Any, tokenizer: Any, data: SFTData,
                 seed: int, name: str) -> None:
        self.settings, self.source, self.model, self.tokenizer, self.data = settings, source, model, tokenizer, data
        self.seed, self.name = seed, name
        self.trainable_parameters, self.total_parameters = parameter_counts(model)

    @classmethod
    def prepare(cls, settings: SFTSettings, seed: int | None = None, name: str = "sft") -> "SFTJob":
        """Load the base model, check every row (raises ChatDataError), add the adapters."""
        seed = settings.seed if settings.seed is not None else (seed or 0)
        source = resolve_base_model(settings.base_model)
        if settings.export.merged == "none" and source.gguf is None:
            raise BaseModelError(f"export.merged = 'none' keeps only the adapter, which llama.cpp applies to a GGUF base; "
                                 f"base_model {settings.base_model!r} has none: export a merged model (q8_0 or f16)")
        model, tokenizer = load_base_model(source)
        data = prepare_sft_data(settings, tokenizer)
        return cls(settings, source, add_lora(model, settings.lora, seed), tokenizer, data, seed, name)

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
        import torch

        rng = torch.get_rng_state()
        batch = collate([self.data.train[i] for i in self.step_groups(0)[0][0]], self.tokenizer.pad_token_id)
        self.model.train()
        started = time.perf_counter()
        loss_sum, count = chunked_causal_lm_loss(self.model, batch.input_ids, batch.attention_mask, batch.labels,
                                                 self.settings.loss_chunk_size)
        (loss_sum / max(count, 1)).backward()
        seconds = time.perf_counter() - started
        self.model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
        return seconds * self.settings.gradient_accumulation_steps

    # -- evaluation -----------------------------------------------------------------------

    def evaluate(self) -> float | None:
        """Mean loss per trained token over the validation rows (None without validation rows)."""
        import torch

        if not self.data.validation:
            return None
        self.model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for indices in batches_of(list(range(len(self.data.validation))), self.settings.batch_size):
                batch = collate([self.data.validation[i] for i in indices], self.tokenizer.pad_token_id)
                loss_sum, tokens = chunked_causal_lm_loss(self.model, batch.input_ids, batch.attention_mask, batch.labels,
                                                          self.settings.loss_chunk_size)
                total, count = total + float(loss_sum), count + tokens
        self.model.train()
        return total / count if count else None

    # -- training -------------------------------------------------------------------------

    def _train_step(self, groups: list[list[int]], training: TrainingState) -> dict[str, Any]:
        import torch

        started = time.perf_counter()
        batches = [collate([self.data.train[i] for i in indices], self.tokenizer.pad_token_id) for indices in groups]
        trained = sum(batch.trained_tokens for batch in batches)
        total = 0.0
        for batch in batches:
            loss_sum, _ = chunked_causal_lm_loss(self.model, batch.input_ids, batch.attention_mask, batch.labels,
                                                 self.settings.loss_chunk_size)
            (loss_sum / max(trained, 1)).backward()
            total += float(loss_sum.detach())
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

    def run(self, output_dir: str | Path, on_event: EventSink = ignore_event, status: Any = None, resume: bool = False,
            stop: StopRequest | None = None) -> SFTResult:
        """Train (continuing from the last checkpoint when ``resume``), then export and register the model.

        ``status`` is a callable taking keyword changes to the run's status (default: ``output_dir/run.json``).
        Raises TrainingInterrupted, after a checkpoint, when ``stop`` is requested.
        """
        import torch

        from promptgym.finetune.sft_finish import finish_sft_run

        folder = Path(output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        checkpoints_dir, history = folder / "checkpoints", StepHistory(folder / "history.csv")
        status = status or JsonStatus(folder / "run.json")
        stop = stop or StopRequest()
        started = time.time()
        optimizer, scheduler = make_optimizer(self.model, self.settings, self.total_steps)
        training = TrainingState(self.model, optimizer, scheduler)
        if resume:
            progress = load_checkpoint(checkpoints_dir, training)
            history.truncate_after(progress.step)
        else:
            torch.manual_seed(self.seed)
            progress = Progress(extra={"checkpoints": [], "elapsed_s": 0.0})
            if history.path.is_file():  # a fresh run in a used folder starts a fresh history
                history.truncate_after(-1)
        elapsed_before = float(progress.extra.get("elapsed_s", 0.0))
        model_id = f"local/{self.settings.model_name or default_model_name(self.name, folder)}"
        status(status="running", model_id=None, planned_model_id=model_id, total_steps=self.total_steps,
               steps_done=progress.step, checkpoints=progress.extra.get("checkpoints", []))
        on_event(SFTStarted(
            base_model=self.settings.base_model, train_rows=len(self.data.train), validation_rows=len(self.data.validation),
            skipped_rows=len(self.data.skipped), epochs=self.settings.n_epochs, steps=self.total_steps,
            steps_per_epoch=self.steps_per_epoch, trainable_parameters=self.trainable_parameters,
            resume_from_step=progress.step if resume else None))
        if "initial_eval_loss" not in progress.extra:
            progress.extra["initial_eval_loss"] = _round(self.evaluate())
            self._emit_eval(on_event, history, progress, progress.extra["initial_eval_loss"], "before")
        self.model.train()

        def checkpoint(reason: str) -> Path:
            progress.extra["elapsed_s"] = elapsed_before + time.time() - started
            entry = {"step": progress.step, "loss": _round(progress.loss), "path": f"checkpoints/{checkpoint_name(progress.step)}"}
            progress.extra["checkpoints"] = [e for e in progress.extra["checkpoints"] if e["step"] != progress.step] + [entry]
            path = save_checkpoint(checkpoints_dir, training, progress)
            status(steps_done=progress.step, checkpoints=progress.extra["checkpoints"])
            on_event(CheckpointSaved(path=entry["path"], step=progress.step, reason=reason))
            return path

        for epoch in range(progress.epoch, self.settings.n_epochs):
            groups = self.step_groups(epoch)
            first = progress.batch_in_epoch if epoch == progress.epoch else 0
            for position in range(first, len(groups)):
                measured = self._train_step(groups[position], training)
                progress.step, progress.epoch, progress.batch_in_epoch = progress.step + 1, epoch, position + 1
                progress.loss = measured["loss"]
                row = {"step": progress.step, "epoch": epoch + (position + 1) / len(groups), "loss": _round(measured["loss"]),
                       "lr": measured["lr"], "tokens_per_s": _round(measured["tokens_per_s"], 1),
                       "grad_norm": _round(measured["grad_norm"], 4), "seconds": _round(measured["seconds"], 3),
                       "elapsed_s": round(elapsed_before + time.time() - started, 2)}
                eval_due = self.settings.eval_steps and progress.step % self.settings.eval_steps == 0
                if eval_due and progress.step < self.total_steps:
                    row["eval_loss"] = _round(self.evaluate())
                history.append(row)
                on_event(SFTStep(total_steps=self.total_steps, **row))
                if row.get("eval_loss") is not None:
                    on_event(SFTEval(step=progress.step, eval_loss=row["eval_loss"], label="step"))
                if stop.requested:
                    path = checkpoint(f"stop ({stop.reason})")
                    status(status="interrupted", elapsed_s=round(progress.extra["elapsed_s"], 2))
                    raise TrainingInterrupted(progress.step, path)
                if progress.step % self.settings.save_steps == 0 and progress.step < self.total_steps:
                    checkpoint("save_steps")
            progress.epoch, progress.batch_in_epoch = epoch + 1, 0
        if "final_eval_loss" not in progress.extra:
            progress.extra["final_eval_loss"] = _round(self.evaluate())
            self._emit_eval(on_event, history, progress, progress.extra["final_eval_loss"], "final")
        checkpoint("end")
        return finish_sft_run(self, folder, progress, on_event, status,
                              model_id, elapsed_before + time.time() - started)

    def _emit_eval(self, on_event: EventSink, history: StepHistory, progress: Progress, loss: float | None,
                   label: str) -> None:
        if loss is None:
            return
        history.append({"step": progress.step, "eval_loss": loss})
        on_event(SFTEval(step=progress.step, eval_loss=loss, label=label))

    def release(self) -> None:
        """Drop the model from memory (before an export, which loads the weights afresh)."""
        self.model = None
        gc.collect()


def sft(settings: SFTSettings, output_dir: str | Path, name: str = "sft", seed: int | None = None,
        on_event: EventSink = ignore_event, resume: bool = False, stop: StopRequest | None = None) -> SFTResult:
    """Fine-tune ``settings.base_model`` on ``settings.train_file``; the result's ``model_id`` is a model string.

    >>> result = sft(SFTSettings(base_model="local/smollm2-135m-instruct", train_file="train.jsonl"), "out")  # doctest: +SKIP
    >>> LanguageModel(model=result.model_id)  # doctest: +SKIP
    """
    return SFTJob.prepare(settings, seed=seed, name=name).run(output_dir, on_event=on_event, resume=resume, stop=stop)

