"""The SFT loop on a tiny in-test model: learning, checkpoints, stop + resume, the run's files and registry entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptgym.finetune import SFTJob, SFTSettings, StopRequest, TrainingInterrupted, run_sft
from tests.finetune.tiny_model import capital_rows, write_rows


def settings_for(tiny_model: Path, tmp_path: Path, **changes) -> SFTSettings:
    train = write_rows(tmp_path / "train.jsonl", capital_rows(20))
    values = dict(base_model=str(tiny_model), train_file=str(train), n_epochs=2, batch_size=4, learning_rate=3e-2,
                  save_steps=3, validation_split=0.2, lora={"r": 4, "alpha": 8, "dropout": 0.1},
                  summary_samples=0)
    return SFTSettings(**{**values, **changes})


def adapter_tensors(folder: Path) -> dict:
    from promptgym.finetune.checkpoint import last_checkpoint, read_adapter

    return read_adapter(last_checkpoint(folder / "checkpoints"))


def test_training_lowers_the_loss_and_leaves_a_usable_run_folder(tiny_model: Path, tmp_path: Path, fake_export) -> None:
    events: list = []
    job = SFTJob.prepare(settings_for(tiny_model, tmp_path, eval_steps=4, summary_samples=1), name="Tiny Run")
    assert (len(job.data.train), len(job.data.validation), job.total_steps) == (16, 4, 8)
    assert job.measure_step_seconds() > 0
    result = run_sft(job, tmp_path / "out", on_event=events.append)

    assert result.final_eval_loss < result.initial_eval_loss
    assert result.model_id.startswith("local/ft-tiny-run-") and result.steps == 8
    assert [c["step"] for c in result.checkpoints] == [3, 6, 8]
    out = tmp_path / "out"
    status = json.loads((out / "run.json").read_text())
    assert status["model_id"] == result.model_id and status["final_eval_loss"] == result.final_eval_loss
    assert status["status"] == "completed" and status["final_loss"] == result.final_loss
    assert [c["path"] for c in status["checkpoints"]] == ["checkpoints/step_000003", "checkpoints/step_000006",
                                                          "checkpoints/step_000008"]
    # only the newest checkpoint keeps the optimizer state; nothing anywhere is a pickle
    assert not (out / "checkpoints/step_000003/optimizer.safetensors").exists()
    assert (out / "checkpoints/step_000008/optimizer.safetensors").is_file()
    assert {p.suffix for p in (out / "checkpoints").rglob("*") if p.is_file()} <= {".json", ".safetensors", ".md"}
    history = (out / "history.csv").read_text().splitlines()
    assert history[0].startswith("step,epoch,loss,eval_loss") and len(history) == 1 + 8 + 2  # steps + before/after
    assert (out / "plots" / "loss.png").is_file() and fake_export == [out / "checkpoints" / "step_000008"]
    summary = (out / "summary.md").read_text()
    assert result.model_id in summary and "| before training |" in summary and "## Sample answers" in summary

    kinds = [event.kind for event in events]
    assert kinds[0] == "sft_started" and kinds.count("sft_step") == 8 and kinds[-1] == "model_registered"
    assert [e["label"] for e in events if e.kind == "sft_eval"] == ["before", "step", "final"]
    step = next(e for e in events if e.kind == "sft_step")
    assert {"step", "total_steps", "loss", "lr", "tokens_per_s"} <= set(step)

    from promptgym.lm.finetuned_models import finetuned_model

    entry = finetuned_model(result.model_id.removeprefix("local/"))
    assert entry.base == str(tiny_model) and entry.merged == result.files["merged"] and entry.run == str(out.resolve())


def test_stop_then_resume_gives_the_same_weights_as_an_uninterrupted_run(tiny_model: Path, tmp_path: Path,
                                                                          fake_export) -> None:
    import torch

    settings = settings_for(tiny_model, tmp_path, save_steps=100)
    straight = run_sft(SFTJob.prepare(settings, name="a"), tmp_path / "straight")

    stop = StopRequest()
    steps_seen: list[int] = []

    def stop_after_three(event) -> None:
        if event.kind == "sft_step":
            steps_seen.append(event.step)
            if event.step == 3:
                stop.request("test")

    with pytest.raises(TrainingInterrupted) as caught:
        run_sft(SFTJob.prepare(settings, name="b"), tmp_path / "split", on_event=stop_after_three, stop=stop)
    assert caught.value.step == 3
    assert json.loads((tmp_path / "split/run.json").read_text())["status"] == "interrupted"
    resumed = run_sft(SFTJob.prepare(settings, name="b"), tmp_path / "split", on_event=stop_after_three, resume=True)

    assert steps_seen == list(range(1, 9))  # no step repeated, none skipped
    assert resumed.steps == straight.steps == 8
    first, second = adapter_tensors(tmp_path / "straight"), adapter_tensors(tmp_path / "split")
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
    assert resumed.final_eval_loss == straight.final_eval_loss
    assert (tmp_path / "split/history.csv").read_text() .count("\n") == (tmp_path / "straight/history.csv").read_text().count("\n")


def test_a_model_name_taken_by_another_run_is_refused(tiny_model: Path, tmp_path: Path, fake_export) -> None:
    settings = settings_for(tiny_model, tmp_path, n_epochs=1, model_name="my-tuned")
    run_sft(SFTJob.prepare(settings), tmp_path / "one")
    with pytest.raises(ValueError, match="'my-tuned' already exists"):
        run_sft(SFTJob.prepare(settings), tmp_path / "two")


def test_the_public_names_stay_functions_after_the_modules_load() -> None:
    import promptgym.finetune.sft_run  # noqa: F401 - a loaded submodule must not shadow the function
    from promptgym.finetune import sft

    assert callable(sft) and sft.__name__ == "sft"


def test_gradient_checkpointing_trains_the_same_weights(tiny_model: Path, tmp_path: Path, fake_export) -> None:
    import torch

    # fp32 and no shared prefix (checkpointing turns it off): both passes then draw the same dropout masks
    settings = settings_for(tiny_model, tmp_path, n_epochs=1, save_steps=100, precision="fp32", share_prefix=False)
    plain = SFTJob.prepare(settings, name="plain")
    recomputed = SFTJob.prepare(settings.model_copy(update={"gradient_checkpointing": True}), name="recomputed")
    assert recomputed.model.get_base_model().is_activation_checkpointing
    assert not plain.model.get_base_model().is_activation_checkpointing
    run_sft(plain, tmp_path / "plain")
    run_sft(recomputed, tmp_path / "recomputed")
    first, second = adapter_tensors(tmp_path / "plain"), adapter_tensors(tmp_path / "recomputed")
    assert first.keys() == second.keys()
    for name in first:
        assert torch.allclose(first[name], second[name], atol=1e-6), name
    assert any(not torch.equal(tensor, torch.zeros_like(tensor)) for tensor in second.values())
