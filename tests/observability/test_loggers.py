"""TensorBoard and MLflowLogger record the same scalars from fit() and from the weight flows' events."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tensorboardX.proto.event_pb2 import Event as TFEvent

from promptgym import callbacks
from promptgym.core.events import ArtifactsWritten, RLIteration, RunFinished, RunStarted, SFTStep, as_record
from promptgym.training.scalars import event_scalars
from tests.training.test_fit import compiled_program, data


def read_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in a TensorBoard log folder (TFRecord framing: length, crc, data, crc)."""
    found: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(log_dir.rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = TFEvent.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                found.setdefault(value.tag, []).append((event.step, round(value.simple_value, 6)))
    return found


def weight_flow_events() -> list:
    sft = [SFTStep(step=step, total_steps=2, epoch=step / 2, loss=2.0 / step, lr=1e-4) for step in (1, 2)]
    rl = [RLIteration(iteration=1, iterations=1, mean_reward=0.25, reward_spread=0.1, groups=2, zero_signal_groups=0,
                      failed_rollouts=0, completion_tokens=40, tokens_per_s=None, rollout_s=1.0, update_s=1.0,
                      seconds=2.0, updated=True, loss=0.5)]
    return [*sft, *rl]


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_tensorboard_writes_step_and_epoch_scalars_from_fit(tmp_path) -> None:
    program, _ = await compiled_program()
    x, y = data()
    await program.fit(x=x, y=y, validation_split=0.2, epochs=2, batch_size=4, verbose=0,
                      callbacks=[callbacks.TensorBoard(log_dir=tmp_path / "tb")])
    scalars = read_scalars(tmp_path / "tb")
    # 4 steps an epoch; the first step has no reward yet (RandomFewShot bootstraps its pool there)
    assert [step for step, _ in scalars["train/step_reward"]] == list(range(2, 9))
    assert [step for step, _ in scalars["epoch/val_reward"]] == [1, 2]
    assert scalars["epoch/val_reward"][-1][1] == 1.0
    assert "epoch/lm_calls" in scalars


def test_tensorboard_takes_the_weight_flows_events_and_records(tmp_path) -> None:
    board = callbacks.TensorBoard(log_dir=tmp_path)
    for event in weight_flow_events():
        board(as_record(event))  # what the CLI's run listener passes
    board(RunFinished(status="completed", elapsed_s=1.0))
    scalars = read_scalars(tmp_path)
    assert scalars["sft/loss"] == [(1, 2.0), (2, 1.0)]
    assert scalars["rl/mean_reward"] == [(1, 0.25)] and scalars["rl/loss"] == [(1, 0.5)]


def test_scalars_leave_out_what_is_not_a_number() -> None:
    step, values = event_scalars(SFTStep(step=3, total_steps=3, epoch=1.0, loss=None, lr=1e-4, grad_norm=float("nan")))
    assert step == 3 and values == {"sft/lr": 0.0001}


@pytest.fixture
def mlruns(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return tmp_path / "mlruns"


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_mlflow_logger_records_params_metrics_program_and_plot(mlruns) -> None:
    program, _ = await compiled_program(name="mlqa")
    x, y = data()
    logger = callbacks.MLflowLogger(tracking_uri=str(mlruns), experiment_name="exp", run_name="first",
                                    tags={"team": "a"}, params={"data": {"examples": 20}})
    await program.fit(x=x, y=y, validation_split=0.2, epochs=2, batch_size=4, verbose=0, callbacks=[logger])
    client = MlflowClient(tracking_uri=mlruns.resolve().as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("exp").experiment_id])
    assert run.info.run_name == "first" and run.info.status == "FINISHED"
    assert run.data.params["optimizer"] == "RandomFewShot" and run.data.params["data.examples"] == "20"
    assert run.data.tags["team"] == "a" and run.data.tags["promptgym.program"] == "mlqa"
    history = client.get_metric_history(run.info.run_id, "epoch/val_reward")
    assert [(metric.step, metric.value) for metric in history][-1] == (2, 1.0)
    assert [metric.step for metric in client.get_metric_history(run.info.run_id, "train/step_reward")] == \
        list(range(2, 9))
    artifacts = {item.path for folder in ("program", "plots") for item in client.list_artifacts(run.info.run_id, folder)}
    assert artifacts == {"program/mlqa.json", "plots/training_history.png"}


def test_mlflow_logger_as_a_run_listener_logs_the_run_folder_and_its_status(mlruns, tmp_path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "summary.md").write_text("# done\n")
    (folder / "events.jsonl").write_text("{}\n")
    logger = callbacks.MLflowLogger(tracking_uri=str(mlruns), experiment_name="sft", artifacts_dir=folder)
    logger(as_record(RunStarted(run_id="20260101-sft-ab12")))
    for event in weight_flow_events():
        logger(as_record(event))
    logger(as_record(callbacks_artifacts()))
    logger(as_record(RunFinished(status="interrupted", elapsed_s=3.0)))
    client = MlflowClient(tracking_uri=mlruns.resolve().as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("sft").experiment_id])
    assert run.info.run_name == "20260101-sft-ab12" and run.info.status == "KILLED"
    assert run.data.metrics["sft/loss"] == 1.0 and run.data.metrics["rl/mean_reward"] == 0.25
    assert [item.path for item in client.list_artifacts(run.info.run_id, "run")] == ["run/summary.md"]


def callbacks_artifacts() -> ArtifactsWritten:
    return ArtifactsWritten(files=["summary.md"])


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_monitor_logs_synalinks_run_layout_to_a_local_store(mlruns) -> None:
    program, _ = await compiled_program(name="monqa")
    x, y = data()
    uri = mlruns.resolve().as_uri()
    monitor = callbacks.Monitor(tracking_uri=uri, experiment_name="mon", run_name="base", tags={"team": "b"},
                                log_program_plot=False)
    await program.fit(x=x, y=y, validation_split=0.2, epochs=2, batch_size=4, verbose=0, callbacks=[monitor])
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("mon").experiment_id])
    [run] = runs
    assert run.info.run_name == "base_train" and run.info.status == "FINISHED"
    assert run.data.params["epochs"] == "2" and run.data.tags["program_name"] == "monqa"
    assert run.data.tags["team"] == "b" and run.data.metrics["val_reward"] == 1.0 and "in_fit" not in run.data.metrics
    assert {item.path for item in client.list_artifacts(run.info.run_id, "model")} == \
        {"model/state_tree.json", "model/model_info.json"}
