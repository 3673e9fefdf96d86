"""Sequence: stages in one fit(), each from the previous best and checked against its own start; one History
with a stage column; a resumed fit goes on inside the stage it was in."""

import json

import pytest

import promptgym as pg
from promptgym.optimizers.base import Optimizer
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from tests.fixtures.make_v1_programs import rewire
from tests.support import EventRecorder, functional_program, labelled


@pg.saving.register_synalinks_serializable(package="tests")
class AddInstruction(Optimizer):
    """Appends ``word`` to the instructions once, accepting it without evidence (the check after it decides)."""

    def __init__(self, word: str, seed=None):
        super().__init__(seed=seed)
        self.word = word

    async def train_step(self, ctx, batch):
        if len(self.candidates) == 1:
            variables = {name: {**value, "instructions": f"{value['instructions']} {self.word}"}
                         for name, value in self.best.variables.items()}
            await self.accept(ctx, self.add_candidate(variables, parent=self.best.id, origin=self.word), reason="-")
        return {}

    def get_config(self):
        return {"word": self.word, "seed": self.seed}


def follows_instructions(request):
    """UPPER makes it right; SHOUT makes it wrong whatever else it was told."""
    system, question = request.messages[0]["content"], last_user_json(request)["question"]
    if "SHOUT" in system:
        return {"answer": "NO"}
    return {"answer": question.upper() if "UPPER" in system else question}


async def test_each_stage_starts_from_the_last_best_and_a_worse_stage_is_undone():
    program = await functional_program(ScriptedLanguageModel(respond=follows_instructions))
    chain = pg.optimizers.Sequence([AddInstruction("UPPER"), AddInstruction("SHOUT"), AddInstruction("PLEASE")])
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=chain)
    x, y = labelled("a", "b")
    recorder = EventRecorder()
    history = await program.fit(x, y, validation_data=labelled("c", "d", "e"), epochs=1, batch_size=2, verbose=0,
                                callbacks=[recorder])
    instructions = next(iter(program.get_variables().values()))["instructions"]
    assert instructions.endswith("UPPER PLEASE")  # SHOUT was worse than its stage's start: undone
    assert history.history["stage"] == ["1:AddInstruction", "2:AddInstruction", "3:AddInstruction"]
    assert history.history["val_reward"] == [1.0, 1.0, 1.0]
    assert [(c["stage"], c["accepted"]) for c in history.comparisons] == [
        ("1:AddInstruction", True), ("2:AddInstruction", False), ("3:AddInstruction", True),
        ("chain", True)]  # the chain's end checked against its start too (issue 42)
    assert chain.stages[1].start.variables == chain.stages[0].best.variables
    ended = [e for e in recorder.events if e.kind == "stage_ended"]
    assert [e["val"]["mean"] for e in ended] == [1.0, 1.0, 1.0]
    assert [e["comparison"]["accepted"] for e in ended] == [True, False, True]
    assert [e["index"] for e in recorder.events if e.kind == "stage_started"] == [0, 1, 2]


async def test_prompt_weights_prompt_names_and_toml_shape_round_trip():
    chain = pg.optimizers.get({"class_name": "Sequence", "config": {"stages": [
        "knnfewshot", {"class_name": "FineTune", "config": {"source": "labels", "n_epochs": 2}}, "knnfewshot"]}})
    assert [type(stage).__name__ for stage in chain.stages] == ["KNNFewShot", "FineTune", "KNNFewShot"]
    again = pg.optimizers.deserialize(json.loads(json.dumps(pg.optimizers.serialize(chain))))
    assert [type(stage).__name__ for stage in again.stages] == ["KNNFewShot", "FineTune", "KNNFewShot"]
    assert again.stages[1].n_epochs == 2
    with pytest.raises(ValueError, match="Sequence stage 2: unknown optimizer 'nope'"):
        pg.optimizers.Sequence(["knn", "nope"])
    with pytest.raises(ValueError, match="at least one stage"):
        pg.optimizers.Sequence([])


class Interrupted(Exception):
    pass


class SaveThenInterruptIn(pg.callbacks.Callback):
    """A kill right after the checkpoint of ``stage``'s first epoch."""

    def __init__(self, path, stage):
        super().__init__()
        self.path, self.stage = path, stage

    def on_epoch_end(self, epoch, logs=None):
        if logs["stage"] == self.stage and epoch == 0:
            self.program.save(str(self.path))
            raise Interrupted


async def test_a_resumed_fit_goes_on_inside_the_stage_it_was_in(tmp_path):
    def chain():
        return pg.optimizers.Sequence([AddInstruction("UPPER"),
                                       pg.optimizers.KNNFewShot(k=1, embedding_model=HashEmbeddingModel(dimensions=32))])

    arguments = dict(validation_data=labelled("c", "d", "e"), epochs=2, batch_size=2, verbose=0)
    x, y = labelled("a", "b")
    straight = await functional_program(ScriptedLanguageModel(respond=follows_instructions))
    straight.compile(reward=pg.rewards.ExactMatch(), optimizer=chain())
    history = await straight.fit(x, y, **arguments)

    lm = ScriptedLanguageModel(respond=follows_instructions)
    first = await functional_program(lm)
    first.compile(reward=pg.rewards.ExactMatch(), optimizer=chain())
    with pytest.raises(Interrupted):
        await first.fit(x, y, callbacks=[SaveThenInterruptIn(tmp_path / "kill.json", "2:KNNFewShot")], **arguments)
    resumed = pg.Program.load(str(tmp_path / "kill.json"))
    rewire(resumed, lm)
    assert resumed.training_setup.optimizer.stage == 1
    second = await resumed.fit(x, y, initial_epoch=1, **arguments)
    assert second.history["stage"] == ["2:KNNFewShot"]  # only what was left: stage 2's second epoch
    assert history.history["stage"] == ["1:AddInstruction"] * 2 + ["2:KNNFewShot"] * 2
    assert list(resumed.get_variables().values()) == list(straight.get_variables().values())
