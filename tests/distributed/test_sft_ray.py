"""SFT on Ray Train (TorchTrainer, CPU workers, DDP over gloo) with the tiny in-test model, on the shared test head.

Each training here starts a Ray Train controller and workers (30-60 s on 2 cores): one test runs in the
fast suite; the others are marked ``integration``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("ray.train")

from promptgym.distributed.local_head import LocalRayHead, listeners_outside_loopback  # noqa: E402
from promptgym.distributed.sft_train import RayTrainExecutor, cluster_on_loopback  # noqa: E402
from promptgym.finetune import SFTJob, SFTSettings, StopRequest, TrainingInterrupted, run_sft  # noqa: E402
from tests.finetune import fixtures  # noqa: E402
from tests.finetune.tiny_model import capital_rows, write_rows  # noqa: E402

# the weight-training tests' fixtures (tests/finetune/conftest.py does not reach this folder)
tiny_model = fixtures.tiny_model
isolated_models_dir = fixtures.isolated_models_dir
fake_export = fixtures.fake_export
one_torch_thread = fixtures.one_torch_thread


@pytest.fixture(autouse=True)
def exports_are_recorded(fake_export: list[Path]) -> None:
    """Export runs at the end of every job here; the tiny tokenizer is unknown to llama.cpp's converter."""


def settings_for(tiny_model: Path, tmp_path: Path, **changes: Any) -> SFTSettings:
    train = write_rows(tmp_path / "train.jsonl", capital_rows(20))
    values = dict(base_model=str(tiny_model), train_file=str(train), n_epochs=2, batch_size=4, learning_rate=3e-2,
                  save_steps=3, validation_split=0.2, lora={"r": 4, "alpha": 8, "dropout": 0.0}, summary_samples=1,
                  eval_steps=4)
    return SFTSettings(**{**values, **changes})


def on_ray(head: LocalRayHead, workers: int) -> RayTrainExecutor:
    return RayTrainExecutor(address=head.gcs_address, num_workers=workers, threads=1)


def adapter(checkpoint: Path) -> dict:
    from promptgym.finetune.checkpoint import read_adapter

    return read_adapter(checkpoint)


def assert_close(first: dict, second: dict, atol: float) -> None:
    import torch

    assert first.keys() == second.keys()
    for name in first:
        assert torch.allclose(first[name], second[name], atol=atol), (name, float((first[name] - second[name]).abs().max()))


def history_rows(folder: Path) -> list[dict[str, float]]:
    from promptgym.finetune.history import StepHistory

    return [{key: row.get(key) or 0.0 for key in ("loss", "grad_norm", "eval_loss")}
            for row in StepHistory(folder / "history.csv").rows()]


def files_of(folder: Path, model_id: str) -> set[str]:
    """The run folder's files (the model's name, which comes from the folder, as MODEL), Ray's own sub-folder left out."""
    name = model_id.removeprefix("local/")
    return {str(path.relative_to(folder)).replace(name, "MODEL") for path in folder.rglob("*") if path.is_file()
            and path.relative_to(folder).parts[0] != "ray"}


def test_connecting_keeps_the_runs_sigterm_handler(ray_head: LocalRayHead) -> None:
    import signal

    import ray

    def handler(signum: int, frame: Any) -> None:  # what stop_on_signals installs: checkpoint, then stop
        pass

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        with on_ray(ray_head, 2).connection():
            assert ray.is_initialized()
            assert signal.getsignal(signal.SIGTERM) is handler  # ray.init's own handler would exit at once
            assert cluster_on_loopback(ray)  # so even `address="auto"` (a submitted job) meets in a file store
        assert not ray.is_initialized()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_two_workers_train_as_one_process_does_and_leave_the_same_run_folder(
        ray_head: LocalRayHead, tiny_model: Path, tmp_path: Path) -> None:
    settings = settings_for(tiny_model, tmp_path, precision="fp32")  # bf16 rounds DDP's average and one sum apart
    local_events: list = []
    local = run_sft(SFTJob.prepare(settings, name="same"), tmp_path / "local", on_event=local_events.append)

    events: list = []
    outside: list[str] = []

    def on_event(event: Any) -> None:
        events.append(event)
        if event.kind == "sft_step" and event.step == 1:  # workers, process group and gloo are all up now
            outside.extend(listeners_outside_loopback(ray_head.pids()))

    job = SFTJob.prepare(settings, name="same")
    result = run_sft(job, tmp_path / "ray", on_event=on_event, executor=on_ray(ray_head, 2))

    assert result.status == "completed" and result.steps == 8
    assert result.final_eval_loss < result.initial_eval_loss
    assert [c["step"] for c in result.checkpoints] == [3, 6, 8]
    # DDP averages the two halves' gradients into the whole batch's: each step's loss and gradient norm (which
    # a wrong scaling would change) and the weights match one process's (no dropout here; the workers sum in
    # another order, so equal up to float rounding, which Adam's normalisation amplifies a little)
    ours, theirs = history_rows(tmp_path / "ray"), history_rows(tmp_path / "local")
    for key in ("loss", "grad_norm", "eval_loss"):
        assert [row[key] for row in ours] == pytest.approx([row[key] for row in theirs], abs=2e-4), key
    assert_close(adapter(tmp_path / "ray/checkpoints/step_000008"), adapter(tmp_path / "local/checkpoints/step_000008"),
                 atol=1e-4)
    assert result.final_eval_loss == pytest.approx(local.final_eval_loss, abs=1e-4)
    assert outside == [], outside  # nothing of the head, the trainer or torch listens beyond 127.0.0.1

    # the run folder has what a local run's has (plus Ray's copy of the last checkpoint under ray/)
    ray_dir, local_dir = tmp_path / "ray", tmp_path / "local"
    assert files_of(ray_dir, result.model_id) == files_of(local_dir, local.model_id)
    history = (ray_dir / "history.csv").read_text().splitlines()
    assert history[0] == (local_dir / "history.csv").read_text().splitlines()[0]
    assert [line.split(",")[0] for line in history] == [line.split(",")[0] for line in
                                                        (local_dir / "history.csv").read_text().splitlines()]
    status = json.loads((ray_dir / "run.json").read_text())
    assert status["status"] == "completed" and status["model_id"] == result.model_id and status["steps_done"] == 8
    assert [event.kind for event in events] == [event.kind for event in local_events]
    assert [e.step for e in events if e.kind == "checkpoint_saved"] == [3, 6, 8]

    # every checkpoint was reported to Ray; Ray keeps the newest one (num_to_keep=1)
    (reported,) = [path for path in (ray_dir / "ray" / "sft").glob("checkpoint_*") if path.is_dir()]
    assert_close(adapter(reported), adapter(ray_dir / "checkpoints/step_000008"), atol=0)
    snapshot = json.loads((ray_dir / "ray" / "sft" / "checkpoint_manager_snapshot.json").read_text())
    assert '"step": 8' in json.dumps(snapshot)
    assert not list((ray_dir / "ray").glob(".process-group-*"))

    from promptgym.lm.finetuned_models import finetuned_model

    entry = finetuned_model(result.model_id.removeprefix("local/"))
    assert entry.run == str(ray_dir.resolve()) and entry.merged == result.files["merged"]


@pytest.mark.integration
def test_one_worker_gives_exactly_the_weights_of_the_local_loop(ray_head: LocalRayHead, tiny_model: Path,
                                                                tmp_path: Path) -> None:
    settings = settings_for(tiny_model, tmp_path, lora={"r": 4, "alpha": 8, "dropout": 0.1}, summary_samples=0)
    local = run_sft(SFTJob.prepare(settings, name="one"), tmp_path / "local")
    remote = run_sft(SFTJob.prepare(settings, name="one"), tmp_path / "ray", executor=on_ray(ray_head, 1))
    # Same seed, same rows, same dropout masks: another mask would move the weights by 1e-3 or more. The sums
    # themselves may round apart (~1e-7): Ray's worker runs torch with its own thread count (OMP_NUM_THREADS
    # from its CPUs), so a matmul adds its parts in another order than this process does.
    assert_close(adapter(tmp_path / "ray/checkpoints/step_000008"), adapter(tmp_path / "local/checkpoints/step_000008"),
                 atol=1e-6)
    assert remote.final_loss == pytest.approx(local.final_loss, abs=1e-6)
    assert remote.final_eval_loss == pytest.approx(local.final_eval_loss, abs=1e-6)
    assert (tmp_path / "ray/history.csv").read_text().count("\n") == (tmp_path / "local/history.csv").read_text().count("\n")


@pytest.mark.integration
def test_a_stop_request_checkpoints_the_workers_and_resume_continues(ray_head: LocalRayHead, tiny_model: Path,
                                                                      tmp_path: Path) -> None:
    # fp32, rows encoded whole: each worker then draws the dropout masks of its own rows as the local run does
    settings = settings_for(tiny_model, tmp_path, save_steps=100, summary_samples=0, eval_steps=None,
                            precision="fp32", share_prefix=False)
    run_sft(SFTJob.prepare(settings, name="straight"), tmp_path / "local")
    stop, steps_seen = StopRequest(), []
    stop.request("test")  # as if Ctrl-C was pressed while the workers start: the relay takes it to them

    def record(event: Any) -> None:
        if event.kind == "sft_step":
            steps_seen.append(event.step)

    with pytest.raises(TrainingInterrupted) as caught:
        run_sft(SFTJob.prepare(settings, name="b"), tmp_path / "split", on_event=record, stop=stop,
                                               executor=on_ray(ray_head, 2))
    # every worker stops after the same step, with a checkpoint
    assert caught.value.step == 1 and caught.value.checkpoint.name == "step_000001"
    status = json.loads((tmp_path / "split/run.json").read_text())
    assert status["status"] == "interrupted" and status["steps_done"] == 1
    resumed = run_sft(SFTJob.prepare(settings, name="b"), tmp_path / "split", on_event=record, resume=True,
                                                     executor=on_ray(ray_head, 2))
    assert steps_seen == list(range(1, 9)) and resumed.steps == 8
    assert_close(adapter(tmp_path / "split/checkpoints/step_000008"), adapter(tmp_path / "local/checkpoints/step_000008"),
                 atol=1e-4)  # the optimizer state and schedule came back from the checkpoint
    lines = (tmp_path / "split/history.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["0", *map(str, range(1, 9)), "8"]


@pytest.mark.integration
def test_the_cli_trains_on_its_own_ray_instance_and_stops_it(tiny_model: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from typer.testing import CliRunner

    from promptgym.cli.main import app
    from promptgym.runs.folder import RunFolder, list_runs
    from promptgym.distributed.local_head import descendants
    from tests.finetune.test_sft_cli import write_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COLUMNS", "200")
    before = set(descendants(os.getpid()))
    config = write_config(tmp_path, tiny_model, capital_rows(16))
    result = CliRunner().invoke(app, ["train", "-c", str(config), "--yes", "--executor", "ray", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "step 3/3" in result.output and "model ready: local/ft-tiny-sft-" in result.output
    run = RunFolder(tmp_path / "runs" / list_runs(tmp_path / "runs")[0]["id"])
    status = run.status()
    assert status["status"] == "completed" and "Ray Train: 2 CPU worker(s)" in status["runs_on"]
    assert [c["step"] for c in status["checkpoints"]] == [2, 3]
    kinds = [event["event"] for event in run.events()]
    assert kinds.count("sft_step") == 3 and kinds[-1] == "run_finished"
    assert not set(descendants(os.getpid())) - before  # every process of the run's Ray instance is gone

