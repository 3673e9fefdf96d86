"""`promptgym train` with job.type = "sft" on the tiny in-test model, and `promptgym models list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder, list_runs
from tests.finetune.budget_clock import install_clock, scripted_losses
from tests.finetune.interrupting import sigterm_mid_run
from tests.finetune.tiny_model import capital_rows, write_rows
from tests.observability.test_loggers import read_scalars

runner = CliRunner()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def write_config(folder: Path, model: Path, rows: list[dict], extra: str = "") -> Path:
    write_rows(folder / "train.jsonl", rows)
    config = folder / "sft.toml"
    config.write_text(f"""
[job]
type = "sft"
name = "tiny-sft"

[sft]
base_model = "{model}"
train_file = "train.jsonl"
n_epochs = 1
batch_size = 4
learning_rate = 0.03
save_steps = 2
validation_split = 0.25
summary_samples = 1
{extra}
[sft.lora]
r = 4
alpha = 8
""")
    return config


def test_dry_run_previews_the_job_with_a_measured_step(workdir: Path, tiny_model: Path) -> None:
    config = write_config(workdir, tiny_model, capital_rows(20))
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run", "--examples", "12"])
    assert result.exit_code == 0, result.output
    for expected in ("base model", str(tiny_model), "trainable of", "9 training rows", "3 validation",
                     "1 epoch(s) x 3 steps = 3 steps", "s per step, measured", "dry run: nothing started"):
        assert expected in result.output, expected
    assert list_runs(workdir / "runs") == []


def test_the_preview_says_the_job_trains_on_ray_train(workdir: Path, tiny_model: Path) -> None:
    config = write_config(workdir, tiny_model, capital_rows(20))
    here = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert here.exit_code == 0 and "this process (--executor local)" in here.output
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run", "--executor", "ray", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "Ray Train: 2 CPU worker(s)" in result.output and "DDP over gloo" in result.output
    assert "a local Ray instance on 127.0.0.1" in result.output and "plus starting Ray Train" in result.output


def test_bad_rows_stop_the_job_before_training(workdir: Path, tiny_model: Path) -> None:
    rows = capital_rows(6) + [{"messages": [{"role": "robot", "content": "x"}]}, {"prompt": "p"}]
    config = write_config(workdir, tiny_model, rows)
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 2
    assert "train.jsonl:7: unknown role 'robot'" in result.output and "train.jsonl:8:" in result.output
    assert "skip_invalid_rows" in result.output and list_runs(workdir / "runs") == []


def test_skipped_rows_are_listed_with_file_and_line(workdir: Path, tiny_model: Path, fake_export) -> None:
    rows = capital_rows(12) + [{"messages": [{"role": "robot", "content": "x"}]}] + capital_rows(4)
    config = write_config(workdir, tiny_model, rows, extra="skip_invalid_rows = true\n")
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert "1 invalid skipped" in result.output and "skipping 1 invalid row(s)" in result.output
    problem = "train.jsonl:13: unknown role 'robot'"
    assert problem in result.output
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    assert problem in (run.path / "summary.md").read_text()


def test_a_run_trains_exports_registers_and_lists_the_model(workdir: Path, tiny_model: Path, fake_export) -> None:
    config = write_config(workdir, tiny_model, capital_rows(16))
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert "step 3/3" in result.output and "model ready: local/ft-tiny-sft-" in result.output
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    status = run.status()
    assert status["status"] == "completed" and status["job_type"] == "sft"
    assert status["model_id"].startswith("local/ft-tiny-sft-") and status["final_eval_loss"] is not None
    assert [c["step"] for c in status["checkpoints"]] == [2, 3]
    for name in ("config.toml", "events.jsonl", "history.csv", "summary.md", "plots/loss.png", "checkpoints/last.json"):
        assert (run.path / name).is_file(), name
    kinds = [event["event"] for event in run.events()]
    for kind in ("run_started", "sft_started", "sft_step", "sft_eval", "checkpoint_saved", "model_registered",
                 "run_finished"):
        assert kind in kinds, kind
    listed = runner.invoke(app, ["models", "list"])
    assert status["model_id"] in listed.output and str(tiny_model) in listed.output
    removed = runner.invoke(app, ["models", "remove", status["model_id"]])
    assert removed.exit_code == 0 and status["model_id"] not in runner.invoke(app, ["models", "list"]).output
    chart = runner.invoke(app, ["runs", "watch", run.id, "--stream-format", "chart"])
    assert "* train loss per step" in chart.output and json.loads((run.path / "run.json").read_text())["steps_done"] == 3


@pytest.mark.parametrize("name", ["sft_dates.toml", "sft_example.toml"])
def test_the_example_configs_validate_and_their_rows_pass_the_checks(name: str) -> None:
    from promptgym.cli.config import load_config
    from promptgym.finetune.chat_data import read_chat_jsonl

    config = load_config([Path(__file__).resolve().parents[2] / "examples" / "configs" / name])
    assert config.job.type == "sft" and config.sft.base_model == "local/smollm2-135m-instruct"
    for path in filter(None, (config.sft.train_file, config.sft.validation_file)):
        rows, problems = read_chat_jsonl(path)
        assert rows and problems == []


def test_examples_override_and_unknown_sft_keys(tmp_path: Path, tiny_model: Path) -> None:
    from promptgym.cli.config import ConfigError, load_config

    config = write_config(tmp_path, tiny_model, capital_rows(4), extra="bogus = 1\n")
    with pytest.raises(ConfigError, match="sft.bogus: unknown key"):
        load_config([config])
    config = write_config(tmp_path, tiny_model, capital_rows(4))
    loaded = load_config([config], overrides={"examples": 3, "model": "local/gemma-3-270m"})
    assert (loaded.sft.examples, loaded.sft.base_model) == (3, "local/gemma-3-270m")


def test_an_interrupted_run_resumes_from_its_checkpoint(workdir: Path, tiny_model: Path, fake_export,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    from promptgym.runs import stop as loop

    @contextlib.contextmanager
    def ctrl_c_at_once(stop=None):
        stop = loop.StopRequest()
        stop.request("Ctrl-C")  # as if pressed during the first step
        yield stop

    config = write_config(workdir, tiny_model, capital_rows(16))
    with monkeypatch.context() as patch:
        patch.setattr(loop, "stop_on_signals", ctrl_c_at_once)
        result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 130 and "Continue with: promptgym train --resume" in result.output
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    assert run.status()["status"] == "interrupted" and run.status()["steps_done"] == 1

    dry = runner.invoke(app, ["train", "--resume", run.id, "--dry-run"])
    assert dry.exit_code == 0 and "resuming run" in dry.output and "after step 1" in dry.output
    resumed = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert resumed.exit_code == 0, resumed.output
    assert "resuming after step 1" in resumed.output and "step 1/3" not in resumed.output
    steps = [event["step"] for event in run.events() if event["event"] == "sft_step"]
    assert steps == [1, 2, 3] and run.status()["status"] == "completed"


def test_progress_lines_show_loss_lr_speed_and_eval_loss(workdir: Path, tiny_model: Path, fake_export) -> None:
    import re

    config = write_config(workdir, tiny_model, capital_rows(16), extra="eval_steps = 1\n")
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    # eval_steps = 1 evaluates after every step but the last (the final evaluation is its own line)
    line = re.compile(r"step (\d)/3  loss \d+\.\d{4}  lr \d\.\d\de-\d\d  \d+ tokens/s  eval loss \d+\.\d{4}")
    assert [match.group(1) for match in line.finditer(result.output)] == ["1", "2"]
    assert re.search(r"eval loss \d+\.\d{4} \(before training, step 0\)", result.output)
    assert re.search(r"eval loss \d+\.\d{4} \(after training, step 3\)", result.output)


def test_train_with_the_chart_stream_format_draws_the_losses(workdir: Path, tiny_model: Path, fake_export) -> None:
    config = write_config(workdir, tiny_model, capital_rows(16), extra="eval_steps = 1\n")
    result = runner.invoke(app, ["train", "-c", str(config), "--yes", "--stream-format", "chart"])
    assert result.exit_code == 0, result.output
    assert "* train loss per step   E eval loss" in result.output
    grid = result.output.split("E eval loss", 1)[1].split("+---", 1)[0]
    assert grid.count("*") >= 2 and grid.count("E") >= 2  # both curves have points on the chart
    assert "model: local/ft-tiny-sft-" in result.output


def test_models_list_shows_base_size_and_files_of_a_tuned_model(workdir: Path, tiny_model: Path, fake_export) -> None:
    config = write_config(workdir, tiny_model, capital_rows(8))
    assert runner.invoke(app, ["train", "-c", str(config), "--yes"]).exit_code == 0
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    merged = run.status()["files"]["merged"]
    listed = runner.invoke(app, ["models", "list"]).output
    row = next(line for line in listed.splitlines() if run.status()["model_id"] in line)
    assert "sft " in row and str(tiny_model) in row and "0 MB" in row and "merged:" in row  # fake export: 4 bytes
    folded = "".join(line.split("│")[-2].strip() for line in listed.splitlines() if line.count("│") >= 6)
    assert merged in folded  # the file's path, folded over lines of the table
    assert "local/smollm2-135m-instruct" in listed and "embedded" in listed


def test_sigterm_saves_a_checkpoint_and_the_run_can_resume_from_it(workdir: Path, tiny_model: Path) -> None:
    # many one-row steps, so the signal lands mid-run
    config = write_config(workdir, tiny_model, capital_rows(160))
    config.write_text(config.read_text().replace("batch_size = 4", "batch_size = 1").replace("n_epochs = 1", "n_epochs = 3")
                      .replace("save_steps = 2", "save_steps = 100000"))
    run, _ = sigterm_mid_run(config, workdir, "sft_step")
    status = run.status()
    done = status["steps_done"]
    assert status["status"] == "interrupted" and 1 <= done < 360
    # save_steps is far away: the checkpoint is the one the signal made
    assert [c["step"] for c in status["checkpoints"]] == [done]
    assert json.loads((run.path / "checkpoints" / "last.json").read_text())["step"] == done
    assert (run.path / "checkpoints" / f"step_{done:06d}" / "optimizer.safetensors").is_file()
    kinds = [(event["event"], event.get("step")) for event in run.events()]
    assert ("checkpoint_saved", done) in kinds and ("sft_step", done + 1) not in kinds
    dry = runner.invoke(app, ["train", "--resume", run.id, "--dry-run"])
    assert dry.exit_code == 0 and f"after step {done}" in dry.output


def test_the_preview_names_the_device_and_cuda_without_a_gpu_is_one_clear_line(workdir: Path, tiny_model: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(workdir, tiny_model, capital_rows(12))
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "device" in result.output and ("cpu, bf16 base + fp32 LoRA" in result.output or "cpu, fp32" in result.output)
    monkeypatch.setattr("promptgym.finetune.device.TorchCuda.gpus", lambda self: [])
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run", "--device", "cuda:1"])
    assert result.exit_code == 2
    assert "sft.device: device 'cuda:1': torch sees no CUDA GPU" in result.output and "Traceback" not in result.output


def test_logging_sends_the_sft_steps_to_tensorboard_and_mlflow(workdir: Path, tiny_model: Path, fake_export,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient  # deferred: MLflow takes seconds to import, only this test needs it

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    config = write_config(workdir, tiny_model, capital_rows(16),
                          extra='\n[logging]\ntensorboard = "tb"\nmlflow = { tracking_uri = "mlruns" }\n')
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    run_id = list_runs(workdir / "runs")[0]["id"]
    scalars = read_scalars(workdir / "tb" / run_id)
    assert [step for step, _ in scalars["sft/loss"]] == [1, 2, 3]
    client = MlflowClient(tracking_uri=(workdir / "mlruns").as_uri())
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("tiny-sft").experiment_id])
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.data.tags["promptgym.job_type"] == "sft"
    assert [metric.step for metric in client.get_metric_history(mlflow_run.info.run_id, "sft/loss")] == [1, 2, 3]


def auto_config(folder: Path, model: Path, rows: list[dict], budget: str = "max_train_seconds = 30") -> Path:
    config = write_config(folder, model, rows, extra=budget)
    config.write_text(config.read_text().replace("n_epochs = 1", 'n_epochs = "auto"'))
    return config


def test_n_epochs_auto_in_the_config_fills_its_budget_and_exports_the_best(workdir: Path, tiny_model: Path,
                                                                           fake_export, monkeypatch) -> None:
    clock = install_clock(monkeypatch, step_s=1.0, eval_s=1.0)
    scripted_losses(monkeypatch, clock, [5.0, 4.0, 3.0, 3.5, 3.6, 3.7, 3.8, 3.9, 4.0])  # rises after the 3rd
    config = auto_config(workdir, tiny_model, capital_rows(16))
    dry = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "n_epochs = 'auto': the steps that fill max_train_seconds = 30 s" in dry.output
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert "n_epochs='auto':" in result.output and "model ready: local/ft-tiny-sft-" in result.output
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    [planned] = [event for event in run.events() if event["event"] == "sft_planned"]
    assert planned["budget_s"] == 30 and planned["steps"] > 3
    status = run.status()
    # the early stop after two evaluations not below the best (the third), whose checkpoint is exported
    assert status["status"] == "completed" and status["steps_done"] < planned["steps"]
    assert clock.now <= 30


@pytest.mark.parametrize(("budget", "expected"), [
    ("", "set max_train_seconds"),
    ("max_train_seconds = 30\nmax_steps = 4", "drop max_steps and eval_steps"),
])
def test_n_epochs_auto_without_its_budget_is_a_config_error(workdir: Path, tiny_model: Path, budget: str,
                                                            expected: str) -> None:
    config = auto_config(workdir, tiny_model, capital_rows(16), budget=budget)
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert result.exit_code != 0 and expected in result.output and "sft" in result.output, result.output


def test_max_train_seconds_with_a_fixed_epoch_count_names_n_epochs(workdir: Path, tiny_model: Path) -> None:
    config = write_config(workdir, tiny_model, capital_rows(16), extra="max_train_seconds = 30")
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert result.exit_code != 0 and "set n_epochs = 'auto'" in result.output, result.output


def test_n_epochs_auto_on_ray_is_refused_before_anything_loads(workdir: Path, tiny_model: Path) -> None:
    config = auto_config(workdir, tiny_model, capital_rows(16))
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run", "--executor", "ray"])
    assert result.exit_code != 0 and "does not run on Ray Train yet" in result.output, result.output
    assert "preparing" not in result.output
