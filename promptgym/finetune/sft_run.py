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

import logging
import time
from pathlib import Path
from typing import Any, Protocol

from promptgym.core.deprecation import renamed_keyword, renamed_names
from promptgym.core.events import Event, SFTEval, SFTPlanned, SFTStarted, SFTStep
from promptgym.finetune import auto_epochs
from promptgym.finetune.auto_epochs import AutoBudget, BudgetPlan, plan_budget, step_seconds
from promptgym.finetune.batches import collate
from promptgym.finetune.checkpoint import Progress, checkpoint_name, last_checkpoint, read_adapter, read_progress
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

logger = logging.getLogger("promptgym")

__all__ = ["AutoBudget", "SFTJob", "SFTResult", "SFTRun", "TrainingExecutor", "TrainingInterrupted", "default_model_name",
           "run_sft", "sft"]


class TrainingExecutor(Protocol):
    """Where an SFT job's loop runs instead of this process: ``promptgym.distributed.RayTrainExecutor``."""

    def train(self, job: SFTJob, folder: Path, on_event: EventSink, status: StatusSink, resume: bool,
              stop: StopRequest, started: float) -> Any: ...


def _round(value: float | None, digits: int = 5) -> float | None:
    return None if value is None else round(float(value), digits)


class SFTRun(WeightRun):
    """One session of an SFT run on the skeleton: the epochs of optimiser steps, the evaluations, the summary.

    Every evaluation (before training, every ``eval_steps``, at the end) is kept in the progress, with the
    best so far: ``early_stopping_patience`` ends the run after that many evaluations in a row not below the
    best, and ``keep_best`` exports the best one's adapter. With ``budget`` (``n_epochs="auto"``) the run
    times its first steps, then plans its steps and evaluations to fill the budget
    (:mod:`promptgym.finetune.auto_epochs`); the plan is saved with the checkpoints, so a resumed run keeps it.
    """

    method = "sft"
    job: SFTJob
    samples: list[dict[str, str]] = []  # the summary's sample answers, made before the model is released

    def __init__(self, *args: Any, budget: AutoBudget | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.budget = budget
        self.budget_before, self.session_clock = 0.0, auto_epochs.clock()

    def started_event(self, resume: bool) -> Event:
        job = self.job
        return SFTStarted(
            base_model=self.settings.base_model, train_rows=len(job.data.train), validation_rows=len(job.data.validation),
            skipped_rows=len(job.data.skipped), epochs=self.settings.n_epochs, steps=job.total_steps,
            steps_per_epoch=job.steps_per_epoch, trainable_parameters=job.trainable_parameters,
            resume_from_step=self.progress.step if resume else None)

    def checkpoint_entry(self) -> dict[str, Any]:
        return {"step": self.progress.step, "loss": _round(self.progress.loss), **super().checkpoint_entry()}

    # -- the time budget (n_epochs="auto") ----------------------------------------------------

    def begin(self, resume: bool) -> Progress:
        if self.budget is not None:  # until the plan: room for as many passes as a plan may choose
            self.change_settings(n_epochs=auto_epochs.MAX_EPOCHS, max_steps=None, eval_steps=None)
        progress = super().begin(resume)
        self.budget_before, self.session_clock = float(progress.extra.get("budget_used_s", 0.0)), auto_epochs.clock()
        if progress.extra.get("plan"):
            self.apply_plan(BudgetPlan.from_dict(progress.extra["plan"]))
            self.status(total_steps=self.units)
        return progress

    @property
    def budget_used(self) -> float:
        """Seconds of the budget used, over every session of the run."""
        return self.budget_before + auto_epochs.clock() - self.session_clock

    def checkpoint(self, reason: str) -> Path | None:
        if self.budget is not None:
            self.progress.extra["budget_used_s"] = round(self.budget_used, 3)
        return super().checkpoint(reason)

    def change_settings(self, **changes: Any) -> None:
        self.settings = self.job.settings = self.job.settings.model_copy(update=changes)

    def apply_plan(self, plan: BudgetPlan) -> None:
        self.change_settings(n_epochs=plan.whole_epochs, max_steps=plan.steps, eval_steps=plan.eval_steps,
                             early_stopping_patience=plan.patience, keep_best=True)

    def make_plan(self) -> None:
        """After the first steps: the steps that fill the budget (the caller checkpoints it at once, so a
        resume keeps the plan)."""
        assert self.budget is not None
        extra = self.progress.extra
        plan = plan_budget(self.budget, used_s=self.budget_used, step_s=step_seconds(extra["measured_s"]),
                           eval_s=float(extra.get("eval_s") or 0.0), steps_done=self.progress.step,
                           steps_per_epoch=self.job.steps_per_epoch)
        extra["plan"] = plan.as_dict()
        self.apply_plan(plan)
        logger.info("SFT of %s: n_epochs='auto' planned %s", self.settings.base_model, plan.describe())
        self.on_event(SFTPlanned(steps=plan.steps, epochs=plan.epochs, steps_per_epoch=plan.steps_per_epoch,
                                 eval_steps=plan.eval_steps, patience=plan.patience, step_s=plan.step_s,
                                 eval_s=plan.eval_s, budget_s=plan.budget_s, capped=plan.capped))
        self.status(total_steps=self.units)

    # -- the loop -----------------------------------------------------------------------------

    def ended(self) -> bool:
        return self.progress.step >= self.job.total_steps or bool(self.progress.extra.get("stopped"))

    def train_steps(self) -> None:
        job, progress, extra = self.job, self.progress, self.progress.extra
        forward = self.replicas.loss_function(job.model, job.model_loss)
        if "initial_eval_loss" not in extra:
            started = auto_epochs.clock()
            extra["initial_eval_loss"] = _round(job.evaluate())
            extra["eval_s"] = round(auto_epochs.clock() - started, 4)  # what the plan counts an evaluation at
            self._emit_eval(extra["initial_eval_loss"], "before")
            if extra["initial_eval_loss"] is not None:
                self.watch(extra["initial_eval_loss"], save=self.settings.keep_best or self.budget is not None)
        job.model.train()
        while not self.ended():
            epoch = progress.epoch
            groups = job.step_groups(epoch)
            for position in range(progress.batch_in_epoch, len(groups)):
                started = auto_epochs.clock()
                row = self._step(groups[position], epoch, (position + 1) / len(groups), forward)
                progress.batch_in_epoch = position + 1
                saved = self.after_step(row, auto_epochs.clock() - started)
                self.stop_if_requested()
                if not saved:
                    self.save_if_due()
                if self.ended():
                    break
            if progress.batch_in_epoch >= len(groups):
                progress.epoch, progress.batch_in_epoch = epoch + 1, 0
        if "final_eval_loss" not in extra:
            evals = extra.get("evals") or []
            if evals and evals[-1][0] == progress.step:  # just evaluated (an early stop): the same weights
                extra["final_eval_loss"] = evals[-1][1]
                self.on_event(SFTEval(step=progress.step, eval_loss=evals[-1][1], label="final"))
            else:
                extra["final_eval_loss"] = _round(job.evaluate())
                self._emit_eval(extra["final_eval_loss"], "final")
                if extra["final_eval_loss"] is not None:
                    self.watch(extra["final_eval_loss"], save=False)  # the end checkpoint comes next

    def eval_due(self) -> bool:
        """Every ``eval_steps``, except at the last step (the final evaluation comes after the loop)."""
        step, every = self.progress.step, self.settings.eval_steps
        return bool(every) and step % every == 0 and step < self.job.total_steps  # type: ignore[operator]

    def after_step(self, row: dict[str, Any], seconds: float) -> bool:
        """The plan after the first steps, the step's evaluation (best, early stop), the budget; whether it
        saved a checkpoint."""
        extra, step = self.progress.extra, self.progress.step
        planned = False
        if self.budget is not None and "plan" not in extra:
            measured = extra.setdefault("measured_s", [])
            measured.append(round(seconds, 4))
            if len(measured) >= min(auto_epochs.MEASURED_STEPS, self.job.total_steps):
                self.make_plan()
                planned = True
        loss = row.get("eval_loss")
        if planned and loss is None and self.eval_due():  # the plan's first evaluation falls on this step
            loss = _round(self.job.evaluate())
            self._emit_eval(loss, "step")
        saved = False
        if loss is not None:
            saved = self.watch(loss, save=self.settings.keep_best and not planned)  # the plan's checkpoint is next
            patience, best = self.settings.early_stopping_patience, extra["best"]
            stale = [s for s, _ in extra["evals"] if s > best["step"]]
            if patience and len(stale) >= patience:
                extra["stopped"] = (f"early stop: validation loss {loss:.4g} at step {step}, not below the best "
                                    f"{best['eval_loss']:.4g} (step {best['step']}) for {patience} evaluations")
        if planned:
            self.checkpoint("plan")  # a resume keeps this plan (and this step's evaluation)
        if self.budget is not None and not extra.get("stopped") and not self.ended() \
                and self.budget_used >= self.budget.seconds:
            extra["stopped"] = f"time budget: max_train_seconds={self.budget.seconds:g} used up at step {step}"
        return saved or planned

    def watch(self, loss: float, save: bool) -> bool:
        """Keep an evaluation and the best so far; with ``save``, checkpoint a new best (its adapter is the
        one exported). Returns whether it saved."""
        extra, step = self.progress.extra, self.progress.step
        extra.setdefault("evals", []).append([step, loss])
        best = extra.get("best")
        if best is not None and loss >= best["eval_loss"]:
            return False
        extra["best"] = {"step": step, "eval_loss": loss, "path": f"checkpoints/{checkpoint_name(step)}"}
        if save:
            self.checkpoint("best eval loss")
        return save

    def _step(self, groups: list[list[int]], epoch: int, fraction: float, forward: Any) -> dict[str, Any]:
        """One optimiser step (its micro-batches ``groups``), its history row and events; returns the row."""
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
        if self.eval_due():
            row["eval_loss"] = _round(job.evaluate())
        self.record(row)
        self.on_event(SFTStep(total_steps=job.total_steps, **row))
        if row.get("eval_loss") is not None:
            self.on_event(SFTEval(step=progress.step, eval_loss=row["eval_loss"], label="step"))
        return row

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

    def exported_checkpoint(self) -> Path:
        """The best evaluation's checkpoint when the run keeps its best (``keep_best``, ``n_epochs="auto"``)."""
        extra = self.progress.extra
        best = extra.get("best")
        if best and (self.settings.keep_best or extra.get("plan")):
            path = self.folder / best["path"]
            if path.is_dir():
                return path
            logger.warning("SFT: the best checkpoint %s is missing; exporting the last one", path)
        return super().exported_checkpoint()

    def before_release(self) -> dict[str, str]:
        job = self.job
        exported = self.exported_checkpoint()
        if exported != last_checkpoint(self.folder / "checkpoints"):  # the samples show the model exported
            load_adapter_state(job.model, read_adapter(exported))
        rows = job.data.validation_rows or job.data.train_rows
        prompts = [row.messages for row in rows[:self.settings.summary_samples]]
        self.samples = sample_answers(job.model, job.tokenizer, prompts)
        plot = plot_losses(self.history.rows(), self.folder / "plots" / "loss.png",
                           title=f"{self.settings.base_model} SFT")
        return {"loss_plot": str(plot)} if plot else {}

    def registry_details(self) -> dict[str, Any]:
        return {"train_file": self.settings.train_file, "train_rows": len(self.job.data.train),
                "steps": self.progress.step, "final_eval_loss": self.progress.extra.get("final_eval_loss"),
                "exported_step": int(self.exported_checkpoint().name[5:]), "lora_r": self.settings.lora.r}

    def result(self, **base: Any) -> SFTResult:
        extra, step = self.progress.extra, self.progress.step
        exported = int(self.exported_checkpoint().name[5:])
        best = extra.get("best") or {}
        plan = extra.get("plan")
        done = f"the planned {step} steps done" if plan else f"{step} steps done"
        return SFTResult(**base, steps=step, final_loss=self.progress.loss,
                         final_eval_loss=extra.get("final_eval_loss"), initial_eval_loss=extra.get("initial_eval_loss"),
                         device=self.job.plan.device, epochs=round(step / max(self.job.steps_per_epoch, 1), 2),
                         eval_losses=[list(e) for e in extra.get("evals") or []], exported_step=exported,
                         best_eval_loss=best.get("eval_loss") if best.get("step") == exported else None,
                         stop_reason=extra.get("stopped") or done, plan=plan)

    def summary_markdown(self, result: SFTResult) -> str:
        return summary_markdown(self.job, result, self.samples)

    def finished_status(self, result: SFTResult) -> dict[str, Any]:
        fields = {key: value for key, value in result.status_fields().items() if key != "output_dir"}
        return {**fields, "samples": self.samples}


def run_sft(job: SFTJob, output_dir: str | Path, on_event: EventSink = ignore_event, status: StatusSink | None = None,
            resume: bool = False, stop: StopRequest | None = None, executor: TrainingExecutor | None = None,
            backend: TrainingExecutor | None = None, budget: AutoBudget | None = None) -> SFTResult:
    """Train ``job`` (continuing from the last checkpoint when ``resume``), then export and register the model.

    ``status`` is a callable taking keyword changes to the run's status (default: ``output_dir/run.json``).
    ``executor`` (e.g. ``promptgym.distributed.RayTrainExecutor``) trains elsewhere; None trains here.
    ``backend`` is its deprecated name. ``budget``: plan the steps to fill it (``n_epochs="auto"``,
    :mod:`promptgym.finetune.auto_epochs`; default: the settings' own ``max_train_seconds``). Raises TrainingInterrupted, after a checkpoint, when ``stop`` is
    requested.
    """
    executor = renamed_keyword("run_sft", "backend", backend, "executor", executor)
    budget = budget or job.settings.time_budget
    run = SFTRun(job, output_dir, on_event, status, stop, replicas=job.replicas, budget=budget)
    if executor is not None and budget is not None:
        raise ValueError("run_sft: a time budget (n_epochs='auto') plans the steps of this process; it does not "
                         "run on a training executor yet: give n_epochs as a number")
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

