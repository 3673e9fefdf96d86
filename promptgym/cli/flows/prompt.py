"""The prompt-learning flow (``job.type = "prompt_learning"``): build the program and data, preview, check the
models answer, then ``fit()`` with a checkpoint after every step (:mod:`promptgym.cli.runner`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console

from promptgym.cli.build import RunPlan, build_run_plan
from promptgym.cli.common import console, fail
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.launch import task_app_for
from promptgym.cli.preflight import check_models
from promptgym.cli.preview import print_checks_before_run, print_headroom, print_preview
from promptgym.runs.events import Listener
from promptgym.cli.render import ChartRenderer, Renderer
from promptgym.cli.runner import execute
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.table_cells import count_cell, reward_cell
from promptgym.training.spend import describe_call_cost


class PromptFlow:
    job_type = "prompt_learning"
    settings_section = None
    override_keys: tuple[tuple[str, str], ...] = ()
    progress_unit = "epoch"
    exports_sft_data = True

    def missing_sections(self, config: JobConfig) -> str | None:
        missing = [name for name in ("data", "program") if getattr(config, name) is None]
        if missing == ["program"] and config.data is not None and config.data.uses_task_app:
            missing = []  # the task app runs the policy
        return f"a prompt_learning job needs the [{missing[0]}] section" if missing else None

    def check_execution(self, execution: ExecutionSpec, config: JobConfig) -> str | None:
        return None

    def environment(self, config: JobConfig, masker: Masker, runs_dir: Path) -> ContextManager[JobConfig]:
        return task_app_for(config, masker, runs_dir)

    def prepare(self, config: JobConfig, masker: Masker, execution: ExecutionSpec, resuming: bool) -> RunPlan:
        """Build the job (a config's factory runs here), preview it, and check its models answer; exit 2 if not."""
        async def build_and_check() -> RunPlan:
            job = await build_run_plan(config)
            print_preview(job, masker, console, execution=execution)
            await check_models(job)
            return job

        try:
            return asyncio.run(build_and_check())
        except ConfigError as error:
            fail(masker.mask(str(error)))

    def confirm_checks(self, prepared: RunPlan, masker: Masker) -> None:
        print_headroom(prepared, masker, console)
        try:
            print_checks_before_run(prepared, console)
        except ValueError as error:  # FineTune's errors: a model it cannot train, no labels to train on
            fail(masker.mask(str(error)))

    def dry_run_note(self) -> str:
        return "dry run: nothing started (the headroom check, which calls the model, is skipped too)"

    def announce_resume(self, run: RunFolder, status: dict[str, Any]) -> bool:
        checkpoint, note = run.usable_checkpoint()
        console.print(f"resuming run {run.id} ({status.get('epochs_done', 0)} epoch(s) done) from "
                      f"{checkpoint.relative_to(run.path) if checkpoint else 'the start'}" + (f": {note}" if note else ""),
                      soft_wrap=True)
        return True

    def resumes_in_worker(self, run: RunFolder) -> bool:
        return run.events_path.is_file()  # an earlier session ran

    def release(self, prepared: RunPlan | None) -> None:
        """Nothing to free: the program holds no weights."""

    def execute(self, run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None,
                resume: bool, prepared: RunPlan | None, execution: ExecutionSpec | None) -> dict[str, Any]:
        return asyncio.run(execute(run, config, masker, listeners, resume=resume, job=prepared, execution=execution))

    def chart(self, console: Console | None) -> Renderer:
        return ChartRenderer(console)

    def report(self, run: RunFolder, status: dict[str, Any], console: Console) -> str | None:
        final = status.get("final") or {}
        interval = ((final.get("statistics") or {}).get("intervals") or {}).get("reward")
        shown = f"{final.get('reward')}" + (f", 95% CI [{interval['low']:.3f}, {interval['high']:.3f}]" if interval else "")
        cost = describe_call_cost((final.get("statistics") or {}).get("cost"))  # cost beside the score
        shown += f"; {cost}" if cost else ""
        console.print(f"best program: {run.path / 'best_program.json'} (final reward {shown})")
        return None

    def model_name(self, config: JobConfig) -> str | None:
        return None

    def progress_cells(self, status: dict[str, Any]) -> tuple[str, str, str, str]:
        return (f"{count_cell(status.get('epochs_done', 0))} epoch(s)", reward_cell(status.get("baseline")),
                reward_cell(status.get("final")), "-")
