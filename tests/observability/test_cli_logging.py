"""`[logging]` in a train config: TensorBoard, MLflow and OpenTelemetry spans for the run, and bad values named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from promptgym import tracing
from promptgym.cli.main import app
from tests.cli.helpers import only_run, write_config
from tests.observability.test_loggers import read_scalars

runner = CliRunner()


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
def test_a_run_reports_to_tensorboard_mlflow_and_a_span_file(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    config = write_config(workdir, extra='''
[logging]
tensorboard = "tb"
otel = true
mlflow = { tracking_uri = "mlruns", experiment = "cli-exp", tags = { owner = "tests" } }
''')
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    run = only_run(workdir)
    scalars = read_scalars(workdir / "tb" / run.id)
    assert [step for step, _ in scalars["epoch/val_reward"]] == [1, 2]
    assert scalars["eval_best/reward"][0][1] == 1.0
    client = MlflowClient(tracking_uri=(workdir / "mlruns").as_uri())
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("cli-exp").experiment_id])
    assert mlflow_run.info.run_name == run.id and mlflow_run.info.status == "FINISHED"
    assert mlflow_run.data.params["optimizer.name"] == "randomfewshot" and mlflow_run.data.tags["owner"] == "tests"
    assert mlflow_run.data.metrics["eval_best/reward"] == 1.0
    logged = {item.path for item in client.list_artifacts(mlflow_run.info.run_id, "run")}
    assert {"run/best_program.json", "run/summary.md", "run/history.csv"} <= logged
    spans = [json.loads(line) for line in (run.path / "spans.jsonl").read_text().splitlines()]
    kinds = {span["attributes"]["promptgym.kind"] for span in spans if "promptgym.kind" in span["attributes"]}
    assert kinds == {"program", "module"} and any(span["name"].startswith("lm ") for span in spans)
    assert not tracing.is_otel_enabled()  # switched off with the run


def test_a_bad_logging_key_is_named(workdir: Path) -> None:
    config = write_config(workdir, extra='[logging]\ntensorbord = "tb"\n')
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 2 and "logging.tensorbord: unknown key" in result.output


def test_a_failing_logger_warns_once_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    from promptgym.runs.loggers import guarded

    calls = []

    def broken(record: dict) -> None:
        calls.append(record)
        raise ConnectionError("mlflow server down")

    listener = guarded("MLflow", broken)
    listener({"event": "run_started"})
    listener({"event": "step"})
    assert len(calls) == 1
    assert "[logging] MLflow stopped: ConnectionError: mlflow server down" in caplog.text
