"""RayExecutor gives exactly what the in-process executor gives: History, scores, failures, usage."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import pytest
import pytest_asyncio
import ray

import promptgym as pg
from promptgym.distributed.local_head import LocalRayHead, listeners_outside_loopback, process_table
from promptgym.distributed.ray_executor import RayExecutor
from promptgym.lm.usage import LEDGER
from promptgym.rollouts import InProcessExecutor, Rollout
from tests.distributed.programs import WORDS, build_program, dataset
from tests.lm.fake_openai_server import FakeOpenAIServer


# One event loop for the module: the shared executor's Ray calls are awaited on the loop it first ran on.
pytestmark = pytest.mark.asyncio(loop_scope="module")


def not_connected() -> None:
    """The tests of connecting and of a local instance need this process not yet connected to Ray."""
    assert not ray.is_initialized(), "another test's Ray connection is still open: this check would pass trivially"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def executor(ray_head: LocalRayHead) -> Iterator[RayExecutor]:
    """Two workers shared by the comparisons below: starting them (two processes importing promptgym, and
    the connection) was most of each test's time. The tests that need no connection open run before it."""
    executor = RayExecutor(address=ray_head.gcs_address, num_workers=2, concurrency=2)
    yield executor
    await executor.close()


def calls_during(before: Any) -> dict[str, int]:
    return {phase: usage.calls for phase, usage in LEDGER.since(before).items() if usage.calls}


async def predictions_and_usage(program: pg.Program, x: Any, **kwargs: Any) -> tuple[list[Any], dict[int, str], dict[str, int]]:
    before = LEDGER.snapshot()
    predictions = await program.predict(x, batch_size=8, verbose=0, **kwargs)
    shown = [p.get_json() if p is not None else None for p in predictions]
    return shown, dict(predictions.failures), calls_during(before)


async def test_a_worker_killed_mid_batch_loses_nothing_and_counts_nothing_twice(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    not_connected()
    x, _ = dataset()
    expected = await predictions_and_usage(build_program(fail_words=["sky"]), x)
    executor = RayExecutor(num_workers=2, concurrency=2)  # its own local instance, stopped by close()
    marker = tmp_path / "died"
    try:
        with caplog.at_level(logging.WARNING, logger="promptgym"):
            got = await predictions_and_usage(build_program(fail_words=["sky"], die_word="river", marker=str(marker)),
                                              x, executor=executor)
        head_pids = executor.head.pids()
        assert not listeners_outside_loopback(head_pids)
    finally:
        await executor.close()
    assert marker.exists()  # a worker really died (it wrote its pid, then SIGKILLed itself)
    assert got == expected
    lines = [r.getMessage() for r in caplog.records if "died while running" in r.getMessage()]
    # one line per call that was in flight when the worker died (more than one when it had several)
    rerun = [int(i) for line in lines for i in line.split("example(s) ")[1].split(" (")[0].split(", ")]
    assert WORDS.index("river") in rerun and executor.retries == len(rerun)  # the dead worker's chunk, once
    assert not set(head_pids) & set(process_table())  # close() stopped the instance it started


async def test_connecting_keeps_the_runs_sigterm_handler(ray_head: LocalRayHead) -> None:
    """`promptgym runs stop` sends SIGTERM, which the run turns into a cancel; ray.init's handler would exit at once."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        pass

    not_connected()
    executor = RayExecutor(address=ray_head.gcs_address, num_workers=2, concurrency=2)
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        executor._connect()
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)
        await executor.close()


async def test_predict_and_evaluate_match_in_process(executor: RayExecutor) -> None:
    x, y = dataset()
    local = build_program(fail_words=["sky", "lamp"])
    remote = build_program(fail_words=["sky", "lamp"])
    expected = await predictions_and_usage(local, x)
    assert set(expected[1]) == {WORDS.index("sky"), WORDS.index("lamp")}  # the failures are really there
    assert await predictions_and_usage(remote, x, executor=executor) == expected
    local.compile(reward="exactmatch")
    remote.compile(reward="exactmatch")
    assert await remote.evaluate(x, y, verbose=0, executor=executor) == await local.evaluate(x, y, verbose=0)
    assert executor.retries == 0


async def test_outcomes_carry_the_same_traces_and_errors(executor: RayExecutor) -> None:
    x, _ = dataset()
    program = build_program(fail_words=["sky"])
    variables = {"answerer/state": {**program.get_variables()["answerer/state"], "instructions": "Shout."}}
    rollouts = [Rollout(i, x[i], variables if i % 2 else None) for i in range(len(x))]
    local = await InProcessExecutor().run(program, rollouts)
    remote = await executor.run(program, rollouts, window=3)
    assert [(o.index, o.prediction, o.error, o.trace) for o in remote] == \
           [(o.index, o.prediction, o.error, o.trace) for o in local]
    assert any(o.trace.steps for o in remote) and remote[WORDS.index("sky")].error.startswith("LMOutputError: ")


async def test_fit_gives_the_same_history_and_variables(executor: RayExecutor) -> None:
    x, y = dataset()
    histories, variables = [], []
    for run_on in (None, executor):
        program = build_program(fail_words=["sky"])
        program.compile(reward="exactmatch", optimizer=pg.optimizers.RandomFewShot(nb_max_examples=2))
        history = await program.fit(x, y, validation_split=0.3, epochs=2, batch_size=4, verbose=0, seed=3,
                                    executor=run_on)
        histories.append(history.history)
        variables.append(program.get_variables())
    assert histories[1] == histories[0]
    assert variables[1] == variables[0]
    assert histories[0]["val_reward"][-1] > 0  # the run learned something: the comparison is not of two empties


async def test_a_server_model_matches_in_process(executor: RayExecutor) -> None:
    import json

    with FakeOpenAIServer(lambda body: json.dumps({"answer": json.loads(body["messages"][-1]["content"])["question"][::-1]})) as server:
        def program() -> pg.Program:
            lm = pg.LanguageModel(model="openai/fake", api_base=server.url, api_key="k", cache=False, concurrency=3)
            return pg.Sequential([pg.Input(data_model=dataset()[0][0].__class__),
                                  pg.Generator(data_model=dataset()[1][0].__class__, language_model=lm, name="g")])

        x, _ = dataset()
        expected = await predictions_and_usage(program(), x)
        assert expected[0][1] == {"answer": "tac"}
        assert await predictions_and_usage(program(), x, executor=executor) == expected


async def test_the_default_executor_is_used_when_none_is_given(executor: RayExecutor) -> None:
    x, _ = dataset(WORDS[:4])
    pg.set_default_executor(executor)
    try:
        predictions = await build_program().predict(x, verbose=0)
    finally:
        pg.set_default_executor(None)
    assert [p.get_json()["answer"] for p in predictions] == ["AB", "CAT", "house", "garden"]
    assert len(executor.workers) == 2  # the rollouts went to the workers
