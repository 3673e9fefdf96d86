"""A third weight trainer on the skeleton (promptgym.finetune.weight_run), as its docstring shows one.

A toy trainer (next-token loss on fixed token rows of the tiny in-test model) supplies only its loop, its
started event and its result; training, checkpoints, stop + resume, status, events and the finish come
from :class:`WeightRun`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from promptgym.core.events import Event, TrainBegin
from promptgym.finetune.base_model import BaseModelSource, load_base_model, resolve_base_model
from promptgym.finetune.checkpoint import last_checkpoint, read_adapter
from promptgym.finetune.device import DevicePlan, plan_device
from promptgym.finetune.lora import add_lora
from promptgym.finetune.loop import StopRequest, TrainingInterrupted
from promptgym.finetune.settings import ExportSettings, LoraSettings, WeightTrainingSettings
from promptgym.finetune.weight_run import WeightRun, WeightRunResult
from promptgym.lm.finetuned_models import finetuned_model

STEPS = 6


@dataclass
class ToyJob:
    """What the skeleton needs of a job (the WeightJob protocol): settings, base model, adapters, device plan."""

    settings: WeightTrainingSettings
    source: BaseModelSource
    model: Any
    plan: DevicePlan
    seed: int = 0
    name: str = "toy"

    @property
    def total_steps(self) -> int:
        return STEPS

    def release(self) -> None:
        self.model = None


@dataclass(kw_only=True)
class ToyResult(WeightRunResult):
    steps: int
    final_loss: float | None


class ToyRun(WeightRun):
    method = "toy"

    def started_event(self, resume: bool) -> Event:
        return TrainBegin(epochs=1, steps=self.units, train_size=STEPS, val_size=0)

    def train_steps(self) -> None:
        import torch  # deferred: a heavy import, as in the real flows

        assert self.training is not None
        self.job.model.train()
        while self.progress.step < self.units:
            step = self.progress.step
            row = torch.tensor([[(7 * step + i) % 200 + 10 for i in range(12)]])
            loss = self.job.model(input_ids=row, labels=row).loss  # LoRA dropout draws from the RNG
            loss.backward()
            self.training.optimizer.step()
            self.training.scheduler.step()
            self.training.optimizer.zero_grad(set_to_none=True)
            self.progress.step, self.progress.loss = step + 1, float(loss.detach())
            self.record({"step": self.progress.step, "loss": self.progress.loss})
            self.stop_if_requested()
            self.save_if_due()

    def result(self, **base: Any) -> ToyResult:
        return ToyResult(steps=self.progress.step, final_loss=self.progress.loss, **base)


def toy_job(tiny_model: Path) -> ToyJob:
    settings = WeightTrainingSettings(base_model=str(tiny_model), learning_rate=3e-2, save_steps=2, seed=0,
                                      lora=LoraSettings(r=4, alpha=8, dropout=0.1),
                                      export=ExportSettings(merged="q8_0", adapter=False))
    plan = plan_device("cpu", "fp32")
    source = resolve_base_model(settings.base_model)
    model, _ = load_base_model(source, plan=plan)
    return ToyJob(settings, source, add_lora(model, settings.lora, 0), plan)


class StopAfter(StopRequest):
    """A stop request that arrives after ``step`` (what Ctrl-C or SIGTERM does, at a step the test chooses)."""

    def __init__(self, run_events: list, step: int) -> None:
        super().__init__()
        self.events, self.step = run_events, step

    @property  # type: ignore[override]
    def requested(self) -> bool:
        saved = [event["step"] for event in self.events if event.kind == "checkpoint_saved"]
        return self._requested or any(step >= self.step for step in saved)

    @requested.setter
    def requested(self, value: bool) -> None:
        self._requested = value


def test_a_new_trainer_on_the_skeleton_trains_checkpoints_and_finishes(tiny_model: Path, tmp_path: Path,
                                                                       fake_export) -> None:
    events: list = []
    result = ToyRun(toy_job(tiny_model), tmp_path / "run", on_event=events.append).run()

    folder = tmp_path / "run"
    assert isinstance(result, ToyResult) and result.status == "completed" and result.steps == STEPS
    assert result.output_dir == folder and result.model_id.startswith("local/ft-toy-")
    assert [c["step"] for c in result.checkpoints] == [2, 4, 6] and result.peak_rss_mb > 0 and result.elapsed_s >= 0
    assert result.files == {"merged": str(folder / "export" / f"{result.model_id[6:]}-q8_0.gguf")}
    assert last_checkpoint(folder / "checkpoints").name == "step_000006"
    assert json.loads((folder / "checkpoints" / "last.json").read_text())["path"] == "step_000006"
    assert len((folder / "history.csv").read_text().splitlines()) == 1 + STEPS
    status = json.loads((folder / "run.json").read_text())
    assert status["status"] == "completed" and status["model_id"] == result.model_id and status["steps_done"] == STEPS
    assert status["checkpoints"] == result.checkpoints and "finished" in status
    kinds = [event.kind for event in events]
    assert kinds[0] == "train_begin" and kinds.count("checkpoint_saved") == 3
    assert kinds[-2:] == ["model_exported", "model_registered"]
    assert result.model_id in (folder / "summary.md").read_text()
    entry = finetuned_model(result.model_id.removeprefix("local/"))
    assert entry.method == "toy" and entry.details == {"steps": STEPS}
    assert fake_export == [folder / "checkpoints" / "step_000006"]


def test_a_stopped_run_resumes_from_its_last_checkpoint_with_identical_weights(tiny_model: Path, tmp_path: Path,
                                                                              fake_export) -> None:
    straight = ToyRun(toy_job(tiny_model), tmp_path / "straight").run()

    events: list = []
    folder = tmp_path / "stopped"
    with pytest.raises(TrainingInterrupted) as stopped:
        ToyRun(toy_job(tiny_model), folder, on_event=events.append, stop=StopAfter(events, 2)).run()
    assert stopped.value.step == 3 and stopped.value.checkpoint == folder / "checkpoints" / "step_000003"
    status = json.loads((folder / "run.json").read_text())
    assert status["status"] == "interrupted" and status["steps_done"] == 3
    assert events[-1].kind == "checkpoint_saved" and events[-1]["reason"] == "stop (requested)"

    resumed = ToyRun(toy_job(tiny_model), folder).run(resume=True)
    assert resumed.steps == STEPS and [c["step"] for c in resumed.checkpoints] == [2, 3, 4, 6]
    assert resumed.final_loss == straight.final_loss
    history = lambda run: (tmp_path / run / "history.csv").read_text()  # noqa: E731 - two reads
    assert history("stopped") == history("straight")
    mine = read_adapter(folder / "checkpoints" / "step_000006")
    theirs = read_adapter(straight.output_dir / "checkpoints" / "step_000006")
    assert mine.keys() == theirs.keys() and all((mine[key] == theirs[key]).all() for key in mine)
