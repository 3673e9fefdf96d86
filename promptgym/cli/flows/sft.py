"""The SFT flow (``job.type = "sft"``): load the base model and check every row, measure a step, preview, then
train LoRA adapters here or on Ray Train (:mod:`promptgym.cli.sft_runner`); the model is exported and registered."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console

from promptgym.cli.common import console, fail
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.runs.events import Listener
from promptgym.cli.render import LossChartRenderer, Renderer
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.sft_runner import execute_sft, prepare_sft, print_sft_preview
from promptgym.cli.table_cells import count_cell, model_cell
from promptgym.cli.weight_resume import WeightFlowSteps
from promptgym.finetune.sft_flow import SFTJob


class SFTFlow(WeightFlowSteps):
    job_type = "sft"
    settings_section = "sft"
    override_keys = (("model", "base_model"), ("examples", "examples"), ("device", "device"))
    progress_unit = "step"
    exports_sft_data = False

    def missing_sections(self, config: JobConfig) -> str | None:
        return "an sft job needs the [sft] section (base_model, train_file, ...)" if config.sft is None else None

    def check_execution(self, execution: ExecutionSpec) -> str | None:
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
        return execute_sft(run, config, masker, listeners, resume=resume, job=prepared, backend=execution)

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
