"""The RL flow (``job.type = "rl"``): start and check the task app, load the base model, preview, then GRPO in
this process (:mod:`promptgym.cli.rl_runner`); the run's last words are its final status JSON."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console

from promptgym.cli.common import console, fail
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.launch import task_app_for
from promptgym.runs.events import Listener
from promptgym.cli.render import Renderer, RewardChartRenderer
from promptgym.cli.rl_runner import connect_environment, execute_rl, prepare_rl, print_rl_preview
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.table_cells import count_cell, model_cell, reward_cell
from promptgym.cli.weight_resume import WeightFlowSteps
from promptgym.finetune.rl.grpo import RLJob
from promptgym.taskapp import TaskAppEnvironment


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

    def check_execution(self, execution: ExecutionSpec) -> str | None:
        if execution.kind != "local":
            return f"--backend {execution.kind}: an rl job trains in this process (use --backend local)"
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
