"""Where an SFT job trains is its *executor* (issue 40's rename); the old names still work, with a warning."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from promptgym.finetune import SFTJob, SFTSettings, run_sft, sft
from tests.finetune.tiny_model import capital_rows, write_rows


class Handed(Exception):
    """Raised by the recording executor: the run reached it."""


class RecordingExecutor:
    """A TrainingExecutor that records the call and trains nothing."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def train(self, job: Any, folder: Path, **keywords: Any) -> Any:
        self.calls.append({"job": job, "folder": folder, **keywords})
        raise Handed


@pytest.fixture
def settings(tiny_model: Path, tmp_path: Path) -> SFTSettings:
    train = write_rows(tmp_path / "train.jsonl", capital_rows(8))
    return SFTSettings(base_model=str(tiny_model), train_file=str(train), n_epochs=1, batch_size=4,
                       validation_split=0.0, lora={"r": 4, "alpha": 8, "dropout": 0.0}, summary_samples=0)


def renames_warned(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning) and "backend" in str(w.message)]


def test_run_sft_hands_the_job_to_its_executor_without_a_warning(settings: SFTSettings, tmp_path: Path) -> None:
    executor, job = RecordingExecutor(), SFTJob.prepare(settings)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Handed):
        warnings.simplefilter("always")
        run_sft(job, tmp_path / "out", executor=executor, resume=True)
    assert renames_warned(caught) == []
    assert len(executor.calls) == 1
    call = executor.calls[0]
    assert call["job"] is job and call["folder"] == tmp_path / "out" and call["resume"] is True


def test_the_old_backend_keyword_still_reaches_the_executor_with_a_deprecation_warning(
        settings: SFTSettings, tmp_path: Path) -> None:
    executor = RecordingExecutor()
    with pytest.warns(DeprecationWarning, match=r"run_sft\(\.\.\., backend=\) is deprecated: use executor="), \
            pytest.raises(Handed):
        run_sft(SFTJob.prepare(settings), tmp_path / "out", backend=executor)
    assert len(executor.calls) == 1
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Handed):
        warnings.simplefilter("always")
        sft(settings, tmp_path / "again", backend=executor)
    assert renames_warned(caught) == ["sft(..., backend=) is deprecated: use executor="]  # once, not again inside
    assert len(executor.calls) == 2 and executor.calls[1]["folder"] == tmp_path / "again"


def test_both_keywords_at_once_is_an_error(settings: SFTSettings, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"run_sft\(\) got both backend= and executor=: pass only executor="):
        run_sft(SFTJob.prepare(settings), tmp_path / "out", executor=RecordingExecutor(), backend=RecordingExecutor())


def test_the_old_class_names_are_deprecated_aliases() -> None:
    from promptgym.distributed.sft_train import RayTrainExecutor
    from promptgym.finetune.sft_run import TrainingExecutor

    with pytest.warns(DeprecationWarning, match="RayTrainBackend is deprecated: use RayTrainExecutor"):
        from promptgym.distributed.sft_train import RayTrainBackend
    assert RayTrainBackend is RayTrainExecutor
    with pytest.warns(DeprecationWarning, match="RayTrainBackend is deprecated: use RayTrainExecutor"):
        from promptgym.distributed import RayTrainBackend as from_the_package
    assert from_the_package is RayTrainExecutor
    with pytest.warns(DeprecationWarning, match="TrainingBackend is deprecated: use TrainingExecutor"):
        from promptgym.finetune.sft_run import TrainingBackend
    assert TrainingBackend is TrainingExecutor
