"""A prompt search interrupted after an epoch and resumed from its saved file does what it would have done."""

from __future__ import annotations

import pytest

import promptgym as pg
from tests.fixtures.make_v1_programs import rewire
from tests.optimizers.prompt_search_support import data, program_for, task_lm


def proposal_task_lm():
    """Proposals never fix the task and differ every time, so the search keeps drawing parents and minibatches."""
    counter = iter(range(10**6))
    lm = task_lm()
    respond = lm._scripted.respond

    def varied(request):
        properties = (request.schema or {}).get("properties", {})
        for key in ("new_instructions", "proposed_instruction"):
            if key in properties:
                return {key: f"Answer the question briefly, variant number {next(counter)} of the wording."}
        return respond(request)

    lm._scripted.respond = varied
    return lm


def make(name, lm):
    if name == "gepa":
        return pg.optimizers.GEPA(reflection_language_model=lm, max_metric_calls=60, reflection_minibatch_size=2)
    return pg.optimizers.MIPRO(proposal_language_model=lm, num_candidates=3, num_trials=8, minibatch_size=2,
                               minibatch_full_eval_steps=2)


def fit_arguments(**extra):
    x, y = data(8)
    xv, yv = data(4, start=100)
    return dict(x=x, y=y, validation_data=(xv, yv), batch_size=4, minibatch_size=2, verbose=0, seed=3, **extra)


class Interrupted(Exception):
    pass


class SaveThenInterrupt(pg.callbacks.Callback):
    """A kill right after epoch 1's checkpoint."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_end(self, epoch, logs=None):
        self.program.save(str(self.path))
        raise Interrupted


def candidates(program):
    return [(c.id, c.parent, c.origin, c.variables) for c in program.training_setup.optimizer.candidates]


@pytest.mark.parametrize("name", ["gepa", "mipro"])
async def test_interrupted_after_epoch_one_and_resumed_equals_an_uninterrupted_run(name, tmp_path):
    lm = proposal_task_lm()
    straight = await program_for(lm)
    straight.compile(reward=pg.rewards.ExactMatch(), optimizer=make(name, lm))
    history = await straight.fit(epochs=2, **fit_arguments())

    lm = proposal_task_lm()
    first = await program_for(lm)
    first.compile(reward=pg.rewards.ExactMatch(), optimizer=make(name, lm))
    first_history = pg.callbacks.History()
    with pytest.raises(Interrupted):
        await first.fit(epochs=2, callbacks=[first_history, SaveThenInterrupt(tmp_path / "after_epoch_1.json")],
                        **fit_arguments())
    resumed = pg.Program.load(str(tmp_path / "after_epoch_1.json"))
    rewire(resumed, lm)
    second_history = await resumed.fit(epochs=2, initial_epoch=1, **fit_arguments())

    assert any(c.epoch == 1 for c in straight.training_setup.optimizer.candidates)  # the search goes on in epoch 2
    assert candidates(resumed) == candidates(straight)
    for key in ("reward", "val_reward", "lm_calls"):
        assert first_history.history[key] + second_history.history[key] == history.history[key], key
