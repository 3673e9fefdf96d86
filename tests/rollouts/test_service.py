"""The rollout layer: values as data, a sliding window, memoised scores, failures counted by example."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

import promptgym as pg
from promptgym.rollouts import InProcessExecutor, Rollout, RolloutService, TrainingAborted
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import Answer, functional_program, questions


def instructed_lm(delay_for=None):
    """Answers with the question, upper-cased when the instructions say UPPER; a delay per question if asked."""

    def respond(request):
        question = last_user_json(request)["question"]
        return {"answer": question.upper() if "UPPER" in request.messages[0]["content"] else question}

    lm = ScriptedLanguageModel(respond=respond)
    if delay_for is not None:
        backend = lm._scripted

        async def complete(request, inner=backend.complete):
            await asyncio.sleep(delay_for(last_user_json(request)["question"]))
            return await inner(request)

        backend.complete = complete
    return lm


def state(instructions, program=None):
    name = program.trainable_variables[0].name if program is not None else "generator/state"
    return {name: {"instructions": instructions, "examples": []}}


async def test_two_candidates_run_at_the_same_time_without_touching_the_program():
    program = await functional_program(instructed_lm(delay_for=lambda q: 0.01))
    before = program.get_variables()
    x = questions("ab", "cd", "ef")
    upper, plain = await asyncio.gather(
        InProcessExecutor().run(program, [Rollout(i, v, state("Answer in UPPER case.", program)) for i, v in enumerate(x)]),
        InProcessExecutor().run(program, [Rollout(i, v, state("Answer.", program)) for i, v in enumerate(x)]))
    assert [o.prediction.answer for o in upper] == ["AB", "CD", "EF"]
    assert [o.prediction.answer for o in plain] == ["ab", "cd", "ef"]
    assert program.get_variables() == before


async def test_the_window_slides_past_a_slow_rollout():
    program = await functional_program(instructed_lm(delay_for=lambda q: 0.3 if q == "slow" else 0.0))
    finished = []

    async def done(outcome):
        finished.append(outcome.index)

    x = questions("slow", *[f"q{i}" for i in range(7)])
    outcomes = await InProcessExecutor().run(program, [Rollout(i, v) for i, v in enumerate(x)], window=2,
                                             on_done=done)
    # Lock-step batches of 2 would finish example 1, then wait for the slow one; a window keeps going.
    assert finished[-1] == 0 and sorted(finished) == list(range(8))
    assert [o.index for o in outcomes] == list(range(8))  # results come back in the order given


def service(program, reward, n, max_errors=None):
    x = questions(*[f"q{i}" for i in range(n)])
    y = np.array([Answer(answer=f"q{i}") for i in range(n)], dtype=object)
    return RolloutService(program, reward, [], {"train": (x, y), "val": ([], [])}, max_errors=max_errors)


async def test_max_errors_counts_failed_examples_not_failures():
    program = await functional_program(ScriptedLanguageModel(responses=[RuntimeError("down")]))
    rollouts = service(program, pg.rewards.ExactMatch(), 10, max_errors=9)
    for attempt in range(3):  # the same 9 examples fail again with other variables: still 9 failed examples
        results = await rollouts.run("train", list(range(9)), variables=state(f"try {attempt}"))
        assert all(r.error and r.reward == 0.0 for r in results)
    assert len(rollouts.failed) == 9 and len(rollouts.failure_log) == 27
    with pytest.raises(TrainingAborted, match="10 examples failed"):
        await rollouts.run("train", [9])


@pytest.mark.parametrize("value", [math.nan, math.inf])
async def test_a_reward_that_is_not_a_finite_number_fails_that_rollout(value):
    async def broken(y_true, y_pred):
        return value

    program = await functional_program(instructed_lm())
    rollouts = service(program, pg.rewards.MeanRewardWrapper(fn=broken), 2, max_errors=10)
    results = await rollouts.run("train", [0, 1])
    assert [r.reward for r in results] == [0.0, 0.0]
    assert all(f"returned {value!r}, not a finite number" in r.error for r in results)


async def test_a_reward_that_raises_fails_that_rollout_only():
    async def picky(y_true, y_pred):
        if y_pred["answer"] == "q1":
            raise KeyError("no such field")
        return 1.0

    program = await functional_program(instructed_lm())
    rollouts = service(program, pg.rewards.MeanRewardWrapper(fn=picky), 3, max_errors=10)
    results = await rollouts.run("train", [0, 1, 2])
    assert [r.reward for r in results] == [1.0, 0.0, 1.0]
    assert "KeyError" in results[1].error and results[0].error is None


async def test_results_are_memoised_and_survive_a_saved_state():
    lm = instructed_lm()
    program = await functional_program(lm)
    rollouts = service(program, pg.rewards.ExactMatch(), 4)
    first = await rollouts.run("train", [0, 1], variables=state("Answer."))
    assert await rollouts.run("train", [1, 0], variables=state("Answer.")) == [first[1], first[0]]
    calls = len(lm.requests)
    restored = service(program, pg.rewards.ExactMatch(), 4)
    restored.set_state(rollouts.get_state())
    again = await restored.run("train", [0, 1], variables=state("Answer."))
    assert len(lm.requests) == calls  # nothing ran again
    assert [(r.prediction, r.reward, r.trace.steps) for r in again] == \
        [(r.prediction, r.reward, r.trace.steps) for r in first]
