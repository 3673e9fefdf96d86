"""What a resumed fit keeps of history.csv: a chain's epochs count from 0 in every stage, so the rows of the
stages before the checkpoint's stay, and only the checkpoint's stage's unfinished epochs go."""

from __future__ import annotations

from pathlib import Path

from promptgym.runs.history import read_history, write_history
from promptgym.training.fit_folder import drop_history_after


def test_a_resumed_chain_keeps_the_rows_of_its_earlier_stages(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    write_history(path, [{"epoch": 0, "stage": "1:FineTune", "reward": 1}, {"epoch": 1, "stage": "1:FineTune"},
                         {"epoch": 0, "stage": "2:RandomFewShot", "reward": 0.5}])
    assert drop_history_after(path, 0, stage=1) == 1  # in stage 2, no epoch done: its row goes, stage 1's stay
    assert [(row["stage"], row["epoch"]) for row in read_history(path)[0]] == [("1:FineTune", "0"), ("1:FineTune", "1")]
    assert drop_history_after(path, 1, stage=0) == 1  # in stage 1 after one epoch: its second epoch runs again
    assert [row["epoch"] for row in read_history(path)[0]] == ["0"]


def test_a_run_without_stages_drops_the_epochs_its_checkpoint_had_not_finished(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    write_history(path, [{"epoch": 0, "reward": 1}, {"epoch": 1, "reward": 1}, {"epoch": 2, "reward": 1}])
    assert drop_history_after(path, 2) == 1
    assert [row["epoch"] for row in read_history(path)[0]] == ["0", "1"]
