"""The one protocol every optimizer has (optimizers.base): ``run(trainer)``, ``estimate``, ``check_before_run``,
``place_outputs``. A lone optimizer is one stage; a Sequence answers each part through its stages, so nothing
outside it reads its stages."""

from __future__ import annotations

from pathlib import Path

import pytest

import promptgym as pg
from promptgym.optimizers.base import FitSizes, Optimizer, Stage, StageEstimate
from promptgym.testing import HashEmbeddingModel

SIZES = FitSizes(train=8, val=4, epochs=2, batch_size=2, minibatch_size=2, calls_per_run=1)


class Trainer:
    """A StageRunner that records the stages it is asked to run and stops after ``stop_after`` of them."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.ran: list[tuple[Optimizer, Stage | None]] = []
        self.stop_after = stop_after

    @property
    def stop_training(self) -> bool:
        return self.stop_after is not None and len(self.ran) >= self.stop_after

    async def run_stage(self, optimizer: Optimizer, stage: Stage | None = None) -> None:
        self.ran.append((optimizer, stage))


class Notes(Optimizer):
    """Says something in each preview hook, so that a Sequence's answer can be traced to its stage."""

    def __init__(self, word: str) -> None:
        super().__init__()
        self.word, self.folder = word, None

    def estimate(self, program, sizes):
        return [StageEstimate("Notes", lm_calls=sizes.val, training_runs=0, note=self.word)]

    def check_before_run(self, program, x, y):
        return [f"{self.word} checked {len(x)}"]

    def place_outputs(self, folder: Path) -> None:
        self.folder = folder


async def test_a_lone_optimizer_runs_as_one_stage_without_a_place_in_a_chain() -> None:
    optimizer, trainer = pg.optimizers.RandomFewShot(), Trainer()
    await optimizer.run(trainer)
    assert trainer.ran == [(optimizer, None)] and not optimizer.in_progress


async def test_a_sequence_runs_each_stage_in_turn_with_its_label_and_stops_when_the_trainer_stops() -> None:
    chain = pg.optimizers.Sequence([Notes("a"), Notes("b"), Notes("c")])
    trainer = Trainer(stop_after=2)
    await chain.run(trainer)
    assert [(stage.word, place) for stage, place in trainer.ran] == [
        ("a", Stage("1:Notes", 0, 3)), ("b", Stage("2:Notes", 1, 3))]
    assert chain.stage == 2 and chain.in_progress  # a resumed fit goes on at the third stage
    again = Trainer()
    await chain.run(again)
    assert [stage.word for stage, _ in again.ran] == ["c"] and not chain.in_progress
    once_more = Trainer()  # a finished chain fitted again runs again, from its first stage
    await chain.run(once_more)
    assert [stage.word for stage, _ in once_more.ran] == ["a", "b", "c"]


def test_a_sequence_answers_the_preview_hooks_through_its_stages(tmp_path: Path) -> None:
    first, second = Notes("a"), Notes("b")
    chain = pg.optimizers.Sequence([first, second])
    assert [(e.note, e.lm_calls) for e in chain.estimate(None, SIZES)] == [("a", 4), ("b", 4)]
    assert chain.check_before_run(None, [1, 2, 3], [1, 2, 3]) == ["stage 1 a checked 3", "stage 2 b checked 3"]
    chain.place_outputs(tmp_path)
    assert (first.folder, second.folder) == (tmp_path / "stage-1", tmp_path / "stage-2")


def test_the_base_answers_give_no_numbers_and_finetune_and_knn_give_theirs(tmp_path: Path) -> None:
    assert pg.optimizers.RandomFewShot().estimate(None, SIZES) == [StageEstimate("RandomFewShot")]
    tune = pg.optimizers.FineTune(source="traces", n_epochs=2, batch_size=4)
    [estimate] = tune.estimate(None, SIZES)
    assert (estimate.lm_calls, estimate.training_runs) == (12, 8)
    assert estimate.note.startswith("SFT <= 4 steps per base model (8 rows, batch 4, 2 epoch(s))")
    tune.place_outputs(tmp_path / "ft")
    assert tune.output_dir == str(tmp_path / "ft")
    kept = pg.optimizers.FineTune(output_dir=str(tmp_path / "mine"))
    kept.place_outputs(tmp_path / "ft")
    assert kept.output_dir == str(tmp_path / "mine")  # a given output_dir is the user's choice
    knn = pg.optimizers.KNNFewShot(k=1, embedding_model=HashEmbeddingModel(dimensions=8), use_labels=False)
    assert knn.estimate(None, SIZES) == [StageEstimate("KNNFewShot", lm_calls=16, training_runs=16)]


@pytest.mark.parametrize("name", ["randomfewshot", "greedy", "omega", "gepa", "mipro"])
def test_every_prompt_optimizer_has_the_protocol_from_the_base(name: str) -> None:
    optimizer = pg.optimizers.get(name)
    assert optimizer.check_before_run(None, [], []) == [] and not optimizer.in_progress
    assert len(optimizer.estimate(None, SIZES)) == 1
