"""A fourth job type for ``promptgym train``: count to ``[count] to``, one status update per number.

Registered with one row of the flow table (docs/writing_a_flow.md):

    from promptgym.cli.flows import FLOWS
    FLOWS["count"] = "custom_flow:CountingFlow"     # or an instance: FLOWS["count"] = CountingFlow()

then ``promptgym train --config count.toml`` with ``[job] type = "count"`` runs it through the one run
session: run folder, status, Ctrl-C/SIGTERM, events, ``runs list``, ``--dry-run``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console

from promptgym.cli.config import JobConfig
from promptgym.cli.execution import ExecutionSpec
from promptgym.runs.events import Listener
from promptgym.cli.render import ChartRenderer, Renderer
from promptgym.runs.folder import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.runs.attempt import RunAttempt


class CountingFlow:
    """Counts to ``[count] to`` (3 by default); ``--examples N`` sets it from the command line."""

    job_type = "count"
    settings_section = "count"
    override_keys = (("examples", "to"),)
    progress_unit = "number"
    exports_sft_data = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def missing_sections(self, config: JobConfig) -> str | None:
        return None

    def check_execution(self, execution: ExecutionSpec, config: JobConfig) -> str | None:
        return None

    def environment(self, config: JobConfig, masker: Masker, runs_dir: Path) -> ContextManager[JobConfig]:
        self.calls.append("environment")
        return contextlib.nullcontext(config)

    def prepare(self, config: JobConfig, masker: Masker, execution: ExecutionSpec, resuming: bool) -> int:
        self.calls.append("prepare")
        to = int(config.flow_sections.get("count", {}).get("to", 3))
        print(f"counting preview: to {to}")
        return to

    def confirm_checks(self, prepared: int, masker: Masker) -> None:
        self.calls.append("confirm_checks")

    def dry_run_note(self) -> str:
        return "dry run: nothing counted"

    def announce_resume(self, run: RunFolder, status: dict[str, Any]) -> bool:
        return False

    def resumes_in_worker(self, run: RunFolder) -> bool:
        return False

    def release(self, prepared: int | None) -> None:
        self.calls.append("release")

    def execute(self, run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None,
                resume: bool, prepared: int | None, execution: ExecutionSpec | None) -> dict[str, Any]:
        self.calls.append("execute")
        session = RunAttempt(run, masker, listeners, job_type=config.job.type, resume=resume)
        with session.ending(lost="numbers"), session.signals():
            for number in range(1, (prepared or 3) + 1):
                run.update_status(counted=number)
        (run.path / "summary.md").write_text("# counted\n")
        return session.finish(status="completed")

    def chart(self, console: Console | None) -> Renderer:
        return ChartRenderer(console)

    def report(self, run: RunFolder, status: dict[str, Any], console: Console) -> str | None:
        console.print(f"counted to {status['counted']}")
        return json.dumps({"last": status["counted"]})

    def model_name(self, config: JobConfig) -> str | None:
        return None

    def progress_cells(self, status: dict[str, Any]) -> tuple[str, str, str, str]:
        return (f"{status.get('counted', 0)} counted", "-", "-", "-")
