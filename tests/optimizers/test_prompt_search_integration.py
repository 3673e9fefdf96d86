"""GEPA and MIPRO on the real embedded engine (smallest model, 6 examples)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import promptgym as pg
from promptgym.lm.usage import LEDGER

pytestmark = pytest.mark.integration


class Review(pg.DataModel):
    review: str = pg.Field(description="A short product review")


class Sentiment(pg.DataModel):
    label: Literal["positive", "negative"] = pg.Field(description="The review's sentiment")


TEXTS = [("I love it, works great", "positive"), ("Broke after a day, awful", "negative"),
         ("Excellent quality, very happy", "positive"), ("Terrible, waste of money", "negative"),
         ("Great value and fast delivery", "positive"), ("Worst purchase ever", "negative")]


async def sentiment_program(lm):
    inputs = pg.Input(data_model=Review)
    outputs = await pg.Generator(data_model=Sentiment, language_model=lm, max_tokens=24,
                                 instructions="Label the review.")(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name="sentiment")


def arrays():
    x = np.array([Review(review=t) for t, _ in TEXTS], dtype=object)
    y = np.array([Sentiment(label=label) for _, label in TEXTS], dtype=object)
    return x[:4], y[:4], x[4:], y[4:]


async def test_gepa_and_mipro_on_smollm2():
    lm = pg.LanguageModel(model="local/smollm2-135m-instruct", max_tokens=160, cache=False)
    x, y, xv, yv = arrays()

    program = await sentiment_program(lm)
    gepa = pg.optimizers.GEPA(max_metric_calls=14, reflection_minibatch_size=2, seed=0, max_instruction_length=300,
                                skip_perfect_score=False)
    program.compile(reward="exactmatch", optimizer=gepa)
    before = LEDGER.snapshot()
    history = await program.fit(x, y, validation_data=(xv, yv), epochs=1, batch_size=2, verbose=0)
    assert gepa.metric_calls <= 14
    assert gepa.metric_calls >= 2  # the start was scored on the 2 validation examples
    start, best = gepa.candidates[0], gepa.best
    assert set(start.scores["val"]) == {"0", "1"}
    assert best.mean("val") >= start.mean("val")
    assert all(0.0 <= s <= 1.0 for c in gepa.candidates for split in c.scores.values() for s in split.values())
    assert 0.0 <= history.history["val_reward"][-1] <= 1.0
    reflections = LEDGER.since(before).get("optimizer")
    reflected = len([c for c in gepa.candidates if c.origin == "reflection"]) + gepa.rejected_proposals
    # every reflection call either became a candidate, was rejected by the guard rails, or failed
    assert gepa.iterations >= 1 and reflections is not None and reflections.calls >= max(1, reflected)
    print("GEPA", gepa.metric_calls, gepa.iterations, len(gepa.candidates), gepa.rejected_proposals,
          gepa.proposal_failures, [c.mean("val") for c in gepa.candidates])

    program = await sentiment_program(lm)
    mipro = pg.optimizers.MIPRO(seed=0, num_candidates=2, num_trials=3, minibatch_size=2, max_lm_calls=40,
                                max_instruction_length=200)
    program.compile(reward="exactmatch", optimizer=mipro)
    await program.fit(x, y, validation_data=(xv, yv), epochs=1, batch_size=4, verbose=0)
    assert mipro.lm_calls <= 40
    assert 1 <= len(mipro.trials) <= 3
    assert mipro.best.id in mipro.full_evaluated
    assert mipro.best.mean("val") >= mipro.candidates[0].mean("val")
    print("MIPRO", mipro.lm_calls, len(mipro.trials), mipro.instruction_candidates, mipro.rejected_proposals)
