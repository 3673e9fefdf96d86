"""The RL flow (``job.type = "rl"``), the whole job type in one file: start and check the task app, load the base
model, preview, then GRPO in this process; the run's last words are its final status JSON.

    environment = await connect_environment(config)    # checks the app and its key: a ConfigError if not
    job = prepare_rl(config)                           # the base model with fresh adapters
    print_rl_preview(job, environment, config, masker, console)
    status = await execute_rl(run, config, masker, [renderer], job=job, environment=environment)

The run folder has what an SFT run has (``run.json``, ``config.toml``, ``events.jsonl``, ``history.csv``,
``summary.md``, ``plots/``, ``checkpoints/``, ``export/``) plus ``final_status.json`` (docs/runs.md).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console
from rich.table import Table

from promptgym.cli.common import console, fail
from promptgym.cli.config import ConfigError, DataSection, JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.launch import task_app_for
from promptgym.cli.render import Renderer, RewardChartRenderer
from promptgym.cli.run_loggers import with_run_loggers
from promptgym.cli.secrets import Masker
from promptgym.cli.table_cells import count_cell, model_cell, reward_cell
from promptgym.cli.weight_resume import WeightFlowSteps
from promptgym.finetune.base_model import BaseModelError
from promptgym.finetune.device import DeviceError
from promptgym.finetune.lora import LoraTargetError
from promptgym.finetune.rl.grpo import RLJob, SeedSplits  # torch, transformers and peft load when a job is prepared
from promptgym.lm.errors import EngineMissingError, UnknownModelError
from promptgym.runs.events import Listener
from promptgym.runs.folder import RunFolder
from promptgym.runs.attempt import RunAttempt
from promptgym.taskapp import TaskAppEnvironment, TaskAppError

DEFAULT_ROLLOUT_CONCURRENCY = 64
DEFAULT_ROLLOUT_TIMEOUT_S = 300.0


def client_options(data: DataSection) -> dict[str, Any]:
    """Rollouts of an iteration all in flight (the policy server batches them), and a timeout that allows
    for waiting behind a batch; explicit ``task_concurrency`` / ``task_timeout`` win."""
    chosen = data.model_fields_set
    return {"concurrency": data.task_concurrency if "task_concurrency" in chosen else DEFAULT_ROLLOUT_CONCURRENCY,
            "timeout": data.task_timeout if "task_timeout" in chosen else DEFAULT_ROLLOUT_TIMEOUT_S,
            "retries": data.task_retries}


async def connect_environment(config: JobConfig) -> TaskAppEnvironment:
    """The task app as an RL environment, after checking it answers and accepts the key."""
    data = config.data
    assert data is not None and data.task_url is not None
    key = os.environ.get(data.task_api_key_env)
    try:
        return await TaskAppEnvironment.connect(data.task_url, api_key=key, **client_options(data))
    except TaskAppError as error:
        hint = (f" (the key is read from ${data.task_api_key_env}, data.task_api_key_env)"
                if getattr(error, "status", None) in (401, 403) else "")
        raise ConfigError(f"data.task_url: {error}{hint}") from None


def seed_splits(config: JobConfig, environment: TaskAppEnvironment) -> SeedSplits:
    """The app's seeds, with the config's overrides and limits (``train_seeds``, ``examples``, ...)."""
    data = config.data
    assert data is not None
    splits = environment.splits
    train = list(data.train_seeds or splits.get("train") or [])[: data.examples]
    if not train:
        raise ConfigError(f"data.train_seeds: the task app {environment.name!r} lists no 'train' seeds; set data.train_seeds")
    validation = list(data.validation_seeds or splits.get("validation") or [])
    test = list(data.test_seeds or splits.get("test") or [])[: data.test_examples]
    return SeedSplits(train, validation, test)


def prepare_rl(config: JobConfig) -> RLJob:
    """An RLJob for the config; an unusable base model becomes a ConfigError naming the problem."""
    assert config.rl is not None
    try:
        return RLJob.prepare(config.rl, seed=config.job.seed, name=config.job.name)
    except (BaseModelError, LoraTargetError, EngineMissingError, UnknownModelError) as error:
        raise ConfigError(f"rl.base_model: {error}") from None
    except DeviceError as error:
        raise ConfigError(f"rl.device: {error}") from None


def rl_preview_rows(job: RLJob, environment: TaskAppEnvironment, config: JobConfig) -> list[tuple[str, str]]:
    settings, splits = job.settings, seed_splits(config, environment)
    lora = settings.lora
    held_name, held = splits.held_out
    rollouts = settings.iterations * settings.batch_size * settings.group_size
    evaluations = settings.iterations // settings.eval_every if settings.eval_every and splits.validation else 0
    options = client_options(config.data)  # type: ignore[arg-type]
    return [
        ("job", f"rl '{config.job.name}' (seed {job.seed})"),
        ("base model", settings.base_model + (f" (GGUF {job.source.gguf.name})" if job.source.gguf else "")),
        ("device", job.plan.describe()),
        ("adapter", f"LoRA r={lora.r} alpha={lora.alpha:g} dropout={lora.dropout:g} on {', '.join(lora.target_modules)}: "
                    f"{job.trainable_parameters:,} trainable of {job.total_parameters:,} parameters"),
        ("task app", f"{environment.name} at {config.data.task_url}: {len(splits.train)} train / "  # type: ignore[union-attr]
                     f"{len(splits.validation)} validation / {len(splits.test)} test seeds; "
                     f"{options['concurrency']} rollouts in flight, {options['timeout']:g} s timeout, "
                     f"{options['retries']} retries"),
        ("GRPO", f"{settings.iterations} iterations x {settings.batch_size} seeds x {settings.group_size} rollouts "
                 f"= {rollouts} rollouts; {settings.updates_per_batch} update(s) per batch, lr {settings.learning_rate:g}, "
                 f"temperature {settings.temperature:g}, up to {settings.max_new_tokens} new tokens per call, "
                 f"beta {settings.beta:g}, clip {settings.clip:g}"),
        ("evaluation", f"greedy on {len(held)} {held_name} seeds before and after"
                       + (f"; on {len(splits.validation)} validation seeds every {settings.eval_every} iterations "
                          f"({evaluations} times)" if evaluations else "")),
        ("checkpoints", f"every {settings.save_steps} iterations, on Ctrl-C and at the end"),
        ("export", f"merged {settings.export.merged}" + (", LoRA adapter GGUF" if settings.export.adapter else "")),
    ]


def print_rl_preview(job: RLJob, environment: TaskAppEnvironment, config: JobConfig, masker: Masker, console: Console) -> None:
    table = Table(title="Resolved job", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rl_preview_rows(job, environment, config):
        table.add_row(key, masker.mask(value))
    console.print(table)


async def execute_rl(run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None = None,
                     resume: bool = False, job: RLJob | None = None,
                     environment: TaskAppEnvironment | None = None) -> dict[str, Any]:
    """Train into the run folder; Ctrl-C/SIGTERM checkpoint and raise KeyboardInterrupt; returns the final status."""
    listeners = with_run_loggers(listeners, config, run, masker)
    session = RunAttempt(run, masker, listeners, job_type=config.job.type, resume=resume)
    with session.ending(lost="iterations"), session.signals() as stop:
        environment = environment or await connect_environment(config)
        job = job or prepare_rl(config)
        result = await job.run(environment, run.path, on_event=session.events.emit, status=run.update_status,
                               resume=resume, stop=stop, splits=seed_splits(config, environment))
    return session.finish(status="completed", final_status=result.final_status())


@dataclass
class PreparedRL:
    environment: TaskAppEnvironment
    job: RLJob


class RLFlow(WeightFlowSteps):
    job_type = "rl"
    settings_section = "rl"
    override_keys = (("model", "base_model"), ("device", "device"))
    progress_unit = "iteration"
    exports_sft_data = False

    def missing_sections(self, config: JobConfig) -> str | None:
        if config.rl is None or config.data is None or not config.data.uses_task_app:
            return ("an rl job needs the [rl] section (base_model, ...) and a task app: data.task_url "
                    "(a running app) or data.task_app (its Python file)")
        return None

    def check_execution(self, execution: ExecutionSpec, config: JobConfig) -> str | None:
        if execution.kind != "local":
            return f"--executor {execution.kind}: an rl job trains in this process (use --executor local)"
        return None

    def environment(self, config: JobConfig, masker: Masker, runs_dir: Path) -> ContextManager[JobConfig]:
        return task_app_for(config, masker, runs_dir)

    def prepare(self, config: JobConfig, masker: Masker, execution: ExecutionSpec, resuming: bool) -> PreparedRL:
        """The app checked first (a wrong key stops here, before the model loads), then the model; the preview."""
        try:
            environment = asyncio.run(connect_environment(config))
            console.print(f"preparing: loading {config.rl.base_model} ...")  # type: ignore[union-attr]
            prepared = PreparedRL(environment, prepare_rl(config))
        except ConfigError as error:
            fail(masker.mask(str(error)))
        print_rl_preview(prepared.job, prepared.environment, config, masker, console)
        return prepared

    def release(self, prepared: PreparedRL | None) -> None:
        if prepared is not None:
            prepared.job.release()

    def execute(self, run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None,
                resume: bool, prepared: PreparedRL | None, execution: ExecutionSpec | None) -> dict[str, Any]:
        job, environment = (prepared.job, prepared.environment) if prepared is not None else (None, None)
        return asyncio.run(execute_rl(run, config, masker, listeners, resume=resume, job=job, environment=environment))

    def chart(self, console: Console | None) -> Renderer:
        return RewardChartRenderer(console)

    def report(self, run: RunFolder, status: dict[str, Any], console: Console) -> str | None:
        """The final status JSON (also the run folder's ``final_status.json``), once the task app is stopped."""
        final = status.get("final_status")
        return json.dumps(final, indent=2) if final is not None else None

    def model_name(self, config: JobConfig) -> str | None:
        return config.rl.model_name if config.rl is not None else None

    def progress_cells(self, status: dict[str, Any]) -> tuple[str, str, str, str]:
        return (f"{count_cell(status.get('iterations_done', 0))}/{count_cell(status.get('iterations'))} iterations",
                reward_cell(status.get("eval_reward_before")), reward_cell(status.get("eval_reward_after")),
                model_cell(status))
