"""The flow table: every job type a config accepts has a flow, and a new flow is one class plus one row."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, ContextManager

import pytest
from rich.console import Console
from typer.testing import CliRunner

from promptgym.cli import flows
from promptgym.cli.config import ConfigError, JobConfig, load_config, validate_config
from promptgym.cli.execution import ExecutionSpec
from promptgym.cli.flows import FLOWS, Flow, flow_for, flow_of_run, job_types
from promptgym.cli.main import app
from promptgym.cli.recorder import Listener
from promptgym.cli.render import ChartRenderer, Renderer
from promptgym.cli.runs import RunFolder
from promptgym.cli.secrets import Masker
from promptgym.cli.session import RunSession
from tests.cli.helpers import only_run

runner = CliRunner()


def test_every_job_type_a_config_accepts_has_a_flow() -> None:
    assert set(job_types()) == {"prompt_learning", "sft", "rl"}
    for job_type in job_types():
        flow = flow_for(job_type)
        assert isinstance(flow, Flow) and flow.job_type == job_type
    with pytest.raises(ConfigError, match=r"job\.type: expected 'prompt_learning', 'sft' or 'rl' \(got 'dpo'\)"):
        validate_config({"job": {"type": "dpo"}}, "run.toml")


def test_each_flow_says_which_sections_its_config_needs() -> None:
    with pytest.raises(ConfigError, match=r"a prompt_learning job needs the \[data\] section"):
        validate_config({}, "run.toml")
    with pytest.raises(ConfigError, match=r"an sft job needs the \[sft\] section"):
        validate_config({"job": {"type": "sft"}}, "run.toml")
    with pytest.raises(ConfigError, match=r"an rl job needs the \[rl\] section"):
        validate_config({"job": {"type": "rl"}}, "run.toml")


def test_a_run_without_a_known_job_type_is_prompt_learning() -> None:
    assert flow_of_run({}).job_type == "prompt_learning"
    assert flow_of_run({"job_type": "gone"}).job_type == "prompt_learning"
    assert flow_of_run({"job_type": "sft"}).job_type == "sft"


class CountingFlow:
    """A fourth job type: counts to ``[count] to``, one event per number, through the one run session."""

    job_type = "count"
    settings_section = "count"
    override_keys = (("examples", "to"),)
    progress_unit = "number"
    exports_sft_data = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def missing_sections(self, config: JobConfig) -> str | None:
        return None

    def check_execution(self, execution: ExecutionSpec) -> str | None:
        return None

    def environment(self, config: JobConfig, masker: Masker, runs_dir: Path) -> ContextManager[JobConfig]:
        self.calls.append("environment")
        return contextlib.nullcontext(config)

    def prepare(self, config: JobConfig, masker: Masker, execution: ExecutionSpec, resuming: bool) -> int:
        self.calls.append("prepare")
        print("counting preview: to 3")
        return 3

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
        session = RunSession(run, masker, listeners, job_type=config.job.type, resume=resume)
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


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingFlow:
    flow = CountingFlow()
    monkeypatch.setitem(FLOWS, "count", flow)  # the one row
    monkeypatch.setattr(JobConfig, "model_config", {**JobConfig.model_config, "extra": "allow"})
    JobConfig.model_rebuild(force=True)
    yield flow
    monkeypatch.undo()
    JobConfig.model_rebuild(force=True)


def test_a_fourth_flow_registered_in_the_table_is_what_train_runs(workdir: Path, counting: CountingFlow) -> None:
    config = workdir / "count.toml"
    config.write_text('[job]\ntype = "count"\nname = "counting"\n')
    assert isinstance(counting, Flow) and flows.flow_for("count") is counting
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert counting.calls == ["environment", "prepare", "confirm_checks", "execute"]
    assert "counted to 3" in result.output and '{"last": 3}' in result.output
    run = only_run(workdir)
    status = run.status()
    assert status["status"] == "completed" and status["job_type"] == "count" and status["pid"] is None
    assert [event["event"] for event in run.events()] == ["run_started", "run_finished"]
    listed = runner.invoke(app, ["runs", "list"])
    assert "3 counted" in listed.output

    dry = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert dry.exit_code == 0 and "dry run: nothing counted" in dry.output


def test_a_flow_own_section_takes_its_override_flags(workdir: Path, counting: CountingFlow) -> None:
    raw_file = workdir / "count.toml"
    raw_file.write_text('[job]\ntype = "count"\n[count]\nto = 3\n')
    config = load_config([raw_file], {"examples": 5})
    assert config.model_extra == {"count": {"to": 5}}
