"""``promptgym train`` for ``job.type = "rl"``: connect to the task app, load the base model, preview, run.

    environment = connect_environment(config)          # checks the app and its key: a ConfigError if not
    job = prepare_rl(config)                           # the base model with fresh adapters
    print_rl_preview(job, environment, config, masker, console)
    status = asyncio.run(execute_rl(run, config, masker, [renderer], job=job, environment=environment))

The run folder has what an SFT run has (``run.json``, ``config.toml``, ``events.jsonl``, ``history.csv``,
``summary.md``, ``plots/``, ``checkpoints/``, ``export/``) plus ``final_status.json``.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.table import Table

from promptgym.cli.config import ConfigError, DataSection, JobConfig
from promptgym.runs.events import Listener
from promptgym.cli.run_loggers import with_run_loggers
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.runs.session import RunSession
from promptgym.finetune.base_model import BaseModelError
from promptgym.finetune.device import DeviceError
from promptgym.finetune.lora import LoraTargetError
from promptgym.finetune.rl.grpo import RLJob, SeedSplits  # torch, transformers and peft load when a job is prepared
from promptgym.lm.errors import EngineMissingError, UnknownModelError
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
    session = RunSession(run, masker, listeners, job_type=config.job.type, resume=resume)
    with session.ending(lost="iterations"), session.signals() as stop:
        environment = environment or await connect_environment(config)
        job = job or prepare_rl(config)
        result = await job.run(environment, run.path, on_event=session.events.emit, status=run.update_status,
                               resume=resume, stop=stop, splits=seed_splits(config, environment))
    return session.finish(status="completed", final_status=result.final_status())
