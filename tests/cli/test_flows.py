"""The flow table: every job type a config accepts has a flow, and a new flow is one class plus one row."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from promptgym.cli import flows
from promptgym.cli.config import ConfigError, load_config, resolved_dict, validate_config
from promptgym.cli.flows import FLOWS, Flow, flow_for, flow_of_run, job_types
from promptgym.cli.main import app
from tests.cli.helpers import only_run

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_flow.py"


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


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_flow", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CountingFlow = load_example().CountingFlow


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingFlow:
    flow = CountingFlow()
    monkeypatch.setitem(FLOWS, "count", flow)  # the one row
    return flow


def test_a_fourth_flow_registered_in_the_table_is_what_train_runs(workdir: Path, counting: CountingFlow) -> None:
    config = workdir / "count.toml"
    config.write_text('[job]\ntype = "count"\nname = "counting"\n\n[count]\nto = 4\n')
    assert isinstance(counting, Flow) and flows.flow_for("count") is counting
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert counting.calls == ["environment", "prepare", "confirm_checks", "execute"]
    assert "counted to 4" in result.output and '{"last": 4}' in result.output
    run = only_run(workdir)
    status = run.status()
    assert status["status"] == "completed" and status["job_type"] == "count" and status["pid"] is None
    assert [event["event"] for event in run.events()] == ["run_started", "run_finished"]
    assert status["counted"] == 4
    listed = runner.invoke(app, ["runs", "list"])
    assert "4 counted" in listed.output

    dry = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert dry.exit_code == 0 and "dry run: nothing counted" in dry.output


def test_a_flow_own_section_takes_its_override_flags(workdir: Path, counting: CountingFlow) -> None:
    raw_file = workdir / "count.toml"
    raw_file.write_text('[job]\ntype = "count"\n[count]\nto = 3\n')
    config = load_config([raw_file], {"examples": 5})
    assert config.flow_sections == {"count": {"to": 5}}
    assert resolved_dict(config)["count"] == {"to": 5}
    with pytest.raises(ConfigError, match="counting"):
        validate_config({"job": {"type": "count"}, "counting": {"to": 1}}, "run.toml")


def test_the_doc_shows_the_whole_example() -> None:
    doc = (EXAMPLE.parents[1] / "docs" / "writing_a_flow.md").read_text()
    assert EXAMPLE.read_text().strip() in doc
