"""A third weight trainer on the skeleton (promptgym.finetune.weight_run), as its docstring shows one.

A toy trainer (next-token loss on fixed token rows of the tiny in-test model) supplies only its loop, its
started event and its result; training, checkpoints, stop + resume, status, events and the finish come
from :class:`WeightRun`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from promptgym.finetune.checkpoint import last_checkpoint, read_adapter
from promptgym.runs.stop import StopRequest, TrainingInterrupted
from promptgym.lm.finetuned_models import finetuned_model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_weight_trainer.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_weight_trainer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


example = load_example()
STEPS, ToyResult, ToyRun = example.STEPS, example.ToyResult, example.ToyRun


def toy_job(tiny_model: Path) -> Any:
    return example.toy_job(str(tiny_model))


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


def test_the_doc_shows_the_whole_example() -> None:
    doc = (EXAMPLE.parents[1] / "docs" / "writing_a_weight_trainer.md").read_text()
    assert EXAMPLE.read_text().strip() in doc
