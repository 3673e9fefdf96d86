"""The SFT flow (``job.type = "sft"``), the whole job type in one file: load the base model and check every row,
measure a step, preview, then train LoRA adapters here or on Ray Train into the run folder; the model is
exported and registered.

    job = prepare_sft(config)                 # loads the base model, checks every row
    print_sft_preview(job, config, job.measure_step_seconds(), masker, console)
    execute_sft(run, config, masker, [renderer], job=job)

The run folder has what a prompt-learning run has (``run.json``, ``config.toml``, ``events.jsonl``,
``history.csv``, ``summary.md``, ``plots/``, ``checkpoints/``) plus ``export/`` with the GGUF files (docs/runs.md).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console
from rich.table import Table

from promptgym.cli.common import console, fail
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.render import LossChartRenderer, Renderer
from promptgym.cli.run_loggers import with_run_loggers
from promptgym.cli.secrets import Masker
from promptgym.cli.table_cells import count_cell, model_cell
from promptgym.cli.weight_resume import WeightFlowSteps
from promptgym.distributed.sft_train import STARTUP_SECONDS
from promptgym.finetune.auto_epochs import MAX_EPOCHS
from promptgym.finetune.base_model import BaseModelError
from promptgym.finetune.chat_data import ChatDataError, describe_problems
from promptgym.finetune.device import DeviceError
from promptgym.finetune.encoding import ChatTemplateError
from promptgym.finetune.lora import LoraTargetError
from promptgym.finetune.settings import SFTSettings
from promptgym.finetune.sft_run import SFTJob, run_sft  # torch, transformers and peft load when a job is prepared
from promptgym.lm.errors import EngineMissingError, UnknownModelError
from promptgym.runs.events import Listener
from promptgym.runs.folder import RunFolder
from promptgym.runs.attempt import RunAttempt

EXPORT_SECONDS = {"q8_0": 15.0, "f16": 10.0, "none": 0.0}


def prepare_sft(config: JobConfig) -> SFTJob:
    """An SFTJob for the config; bad data or an unusable base model become a ConfigError naming the problem."""
    assert config.sft is not None
    try:
        return SFTJob.prepare(config.sft, seed=config.job.seed, name=config.job.name)
    except ChatDataError as error:
        raise ConfigError(f"training data has problems:\n{error}") from None
    except (BaseModelError, ChatTemplateError, LoraTargetError, EngineMissingError, UnknownModelError) as error:
        raise ConfigError(str(error)) from None
    except DeviceError as error:
        raise ConfigError(f"sft.device: {error}") from None


def estimated_seconds(job: SFTJob, step_seconds: float, execution: ExecutionSpec | None = None) -> float:
    """Steps x measured step, plus evaluations (a forward pass is about a third of a step) and the export.

    On Ray, plus starting the trainer; the step is the one measured here (on 2 shared cores, more workers
    don't make it shorter: docs/scaling.md).
    """
    settings = job.settings
    if settings.n_epochs == "auto":  # the run fills its budget (and may stop sooner), then exports
        return float(settings.max_train_seconds or 0.0) + EXPORT_SECONDS[settings.export.merged]
    evals = 2 + (job.total_steps // settings.eval_steps if settings.eval_steps else 0)
    eval_batches = -(-len(job.data.validation) // settings.batch_size)
    per_batch = step_seconds / settings.gradient_accumulation_steps
    startup = STARTUP_SECONDS if execution is not None and execution.kind != "local" else 0.0
    return (job.total_steps * step_seconds + evals * eval_batches * per_batch / 3 + EXPORT_SECONDS[settings.export.merged]
            + startup)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def sft_preview_rows(job: SFTJob, config: JobConfig, step_seconds: float,
                     execution: ExecutionSpec | None = None) -> list[tuple[str, str]]:
    settings, data = job.settings, job.data
    lora = settings.lora
    skipped = f", {len(data.skipped)} invalid skipped" if data.skipped else ""
    trainer = execution.train_executor() if execution is not None else None
    return [
        ("job", f"sft '{config.job.name}' (seed {job.seed})"),
        ("runs on", trainer.describe(use_gpu=job.plan.is_cuda) if trainer else "this process (--executor local)"),
        ("device", job.plan.describe() + ("; the batch's shared prefix encoded once" if job.shares_prefix else "")),
        ("base model", settings.base_model + (f" (GGUF {job.source.gguf.name})" if job.source.gguf else "")),
        ("adapter", f"LoRA r={lora.r} alpha={lora.alpha:g} dropout={lora.dropout:g} on {', '.join(lora.target_modules)}: "
                    f"{job.trainable_parameters:,} trainable of {job.total_parameters:,} parameters"),
        ("data", f"{settings.train_file}: {len(data.train)} training rows ({data.train_tokens:,} tokens), "
                 f"{len(data.validation)} validation ({data.validation_source}){skipped}"),
        ("training", f"{_length(job)}; batch {settings.batch_size} x {settings.gradient_accumulation_steps} accumulation; lr "
                     f"{settings.learning_rate:g}, warmup {settings.warmup_ratio:g}; max_length {settings.max_length}; "
                     f"loss on {settings.train_on} tokens"
                     + ("; activation checkpointing" if settings.gradient_checkpointing else "")),
        ("checkpoints", f"every {settings.save_steps} steps and at the end" + _evaluation_note(settings, len(data.validation))),
        ("export", f"merged {settings.export.merged}" + (", LoRA adapter GGUF" if settings.export.adapter else "")),
        ("est. time", f"{_duration(estimated_seconds(job, step_seconds, execution))} ({step_seconds:.2f} s per step, "
                      "measured" + (", plus starting Ray Train)" if trainer else ")")),
    ]


def _length(job: SFTJob) -> str:
    settings = job.settings
    if settings.n_epochs == "auto":
        return (f"n_epochs = 'auto': the steps that fill max_train_seconds = {settings.max_train_seconds:g} s, "
                f"planned after the first steps ({job.steps_per_epoch} steps an epoch, at most {MAX_EPOCHS} epochs), "
                "stopped early when the validation loss stops falling, the best checkpoint exported")
    return f"{settings.n_epochs} epoch(s) x {job.steps_per_epoch} steps = {job.total_steps} steps"


def _evaluation_note(settings: SFTSettings, validation_rows: int) -> str:
    if settings.n_epochs == "auto":
        return "; evaluations planned with the steps"
    if not validation_rows:
        return "; no evaluation (0 validation rows: set validation_file or validation_split)"
    return f"; eval every {settings.eval_steps} steps" if settings.eval_steps else "; eval before and after"


def print_sft_preview(job: SFTJob, config: JobConfig, step_seconds: float, masker: Masker, console: Console,
                      execution: ExecutionSpec | None = None) -> None:
    table = Table(title="Resolved job", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in sft_preview_rows(job, config, step_seconds, execution):
        table.add_row(key, masker.mask(value))
    console.print(table)
    if job.data.skipped:
        console.print(f"skipping {len(job.data.skipped)} invalid row(s) (skip_invalid_rows = true):", markup=False)
        console.print(masker.mask(describe_problems(job.data.skipped)), markup=False, soft_wrap=True)


def execute_sft(run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None = None,
                resume: bool = False, job: SFTJob | None = None, execution: ExecutionSpec | None = None) -> dict[str, Any]:
    """Train into the run folder (here, or on Ray Train for a Ray ``execution``); Ctrl-C/SIGTERM checkpoint and
    raise KeyboardInterrupt; returns the final status."""
    listeners = with_run_loggers(listeners, config, run, masker)
    trainer = execution.train_executor() if execution is not None else None
    session = RunAttempt(run, masker, listeners, job_type=config.job.type, resume=resume)
    with session.ending(lost="steps"), session.signals() as stop:
        job = job or prepare_sft(config)
        run.update_status(runs_on=trainer.describe(use_gpu=job.plan.is_cuda) if trainer else None)
        result = run_sft(job, run.path, on_event=session.events.emit, status=run.update_status, resume=resume,
                         stop=stop, executor=trainer)
    return session.finish(status="completed", final_loss=result.final_loss, final_eval_loss=result.final_eval_loss)


class SFTFlow(WeightFlowSteps):
    job_type = "sft"
    settings_section = "sft"
    override_keys = (("model", "base_model"), ("examples", "examples"), ("device", "device"))
    progress_unit = "step"
    exports_sft_data = False

    def missing_sections(self, config: JobConfig) -> str | None:
        return "an sft job needs the [sft] section (base_model, train_file, ...)" if config.sft is None else None

    def check_execution(self, execution: ExecutionSpec, config: JobConfig) -> str | None:
        if execution.kind != "local" and config.sft is not None and config.sft.n_epochs == "auto":
            return ("sft.n_epochs = 'auto' plans its steps from this process's own step times, so it does not run "
                    "on Ray Train yet: train here (--executor local), or give n_epochs as a number")
        return None  # here, or on Ray Train

    def environment(self, config: JobConfig, masker: Masker, runs_dir: Path) -> ContextManager[JobConfig]:
        return contextlib.nullcontext(config)

    def prepare(self, config: JobConfig, masker: Masker, execution: ExecutionSpec, resuming: bool) -> SFTJob | None:
        """Load the base model, check every row, measure a step and preview; a resumed run loads when it runs."""
        if resuming:
            return None
        console.print(f"preparing: loading {config.sft.base_model} and checking every row ...")  # type: ignore[union-attr]
        try:
            job = prepare_sft(config)
        except ConfigError as error:
            fail(masker.mask(str(error)))
        print_sft_preview(job, config, job.measure_step_seconds(), masker, console, execution)
        return job

    def release(self, prepared: SFTJob | None) -> None:
        if prepared is not None:
            prepared.release()

    def execute(self, run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None,
                resume: bool, prepared: SFTJob | None, execution: ExecutionSpec | None) -> dict[str, Any]:
        return execute_sft(run, config, masker, listeners, resume=resume, job=prepared, execution=execution)

    def chart(self, console: Console | None) -> Renderer:
        return LossChartRenderer(console)

    def report(self, run: RunFolder, status: dict[str, Any], console: Console) -> str | None:
        console.print(f"model: {run.status().get('model_id')}  (list them with: promptgym models list)")
        return None

    def model_name(self, config: JobConfig) -> str | None:
        return config.sft.model_name if config.sft is not None else None

    def progress_cells(self, status: dict[str, Any]) -> tuple[str, str, str, str]:
        loss = status.get("final_loss")
        return (f"{count_cell(status.get('steps_done', 0))}/{count_cell(status.get('total_steps'))} steps", "-",
                f"loss {loss:.3f}" if isinstance(loss, (int, float)) else "-", model_cell(status))
