"""`promptgym train --executor ray --workers N`: a local Ray instance owned by the run, stopped by process id."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.execution import ExecutionError, ExecutionSpec, parse_execution
from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder, list_runs
from promptgym.distributed.local_head import descendants
from tests.distributed.programs import WORDS

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_backend_values_and_their_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert parse_execution("local") == ExecutionSpec("local")
    assert parse_execution("ray") == ExecutionSpec("ray", None, 2)
    assert parse_execution("ray://10.0.0.5:10001", workers=8) == ExecutionSpec("ray", "ray://10.0.0.5:10001", 8)
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")  # inside a submitted job: join its cluster
    assert parse_execution("ray", workers=3) == ExecutionSpec("ray", "auto", 3)
    with pytest.raises(ExecutionError, match="--workers needs --executor ray"):
        parse_execution("local", workers=2)
    with pytest.raises(ExecutionError, match="expected 'local', 'ray' or 'ray://HOST:PORT'"):
        parse_execution("ray://nohost")
    with pytest.raises(ExecutionError, match=">= 1"):
        parse_execution("ray", workers=0)


def write_config(folder: Path) -> Path:
    data = folder / "train.jsonl"
    data.write_text("".join(json.dumps({"q": w, "a": w.upper()}) + "\n" for w in WORDS[:12]))
    config = folder / "run.toml"
    config.write_text(f"""
[job]
name = "ray-backend"

[program]
factory = "tests.distributed.programs:build_cli_program"

[data]
train = "{data}"
x_fields = {{ question = "q" }}
y_fields = {{ answer = "a" }}
validation_split = 0.25

[optimizer]
name = "randomfewshot"
params = {{ nb_max_examples = 2 }}

[training]
epochs = 1
batch_size = 3
""")
    return config


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the Ray workers import the test program's module
    monkeypatch.syspath_prepend(str(ROOT))
    return tmp_path


def test_the_preview_says_where_the_run_executes(workdir: Path) -> None:
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--dry-run", "--executor", "ray",
                                 "--workers", "3"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "runs on" in result.output and "a local Ray instance on 127.0.0.1" in result.output
    assert "3 worker(s)" in result.output
    bad = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--dry-run", "--workers", "3"])
    assert bad.exit_code == 2 and "--workers needs --executor ray" in bad.output


def test_a_run_on_its_own_ray_instance_completes_and_stops_it(workdir: Path) -> None:
    before = set(descendants(os.getpid()))
    local = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--yes", "--runs-dir", str(workdir / "local")])
    assert local.exit_code == 0, local.output
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--yes", "--executor", "ray", "--workers", "2"])
    assert result.exit_code == 0, result.output
    (status,) = list_runs(workdir / "runs")
    assert status["status"] == "completed" and "2 worker(s)" in status["runs_on"]
    (in_process,) = list_runs(workdir / "local")
    assert status["final"]["reward"] == in_process["final"]["reward"]  # same run, same result
    assert status["baseline"]["reward"] == in_process["baseline"]["reward"]
    run = RunFolder(workdir / "runs" / status["id"])
    assert (run.path / "best_program.json").read_text() == (workdir / "local" / in_process["id"] / "best_program.json").read_text()
    assert not set(descendants(os.getpid())) - before  # every process of the run's Ray instance is gone
