"""Dollars in fit(): figures equal a hand computation from the price table, and max_usd caps the run."""

import asyncio
import json
import warnings

import numpy as np
import pytest

import promptgym as synalinks
from promptgym.lm.prices import Price, UnknownPriceWarning, table_price
from promptgym.lm.usage import lm_phase
from promptgym.optimizers.kit import Budget
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import Answer, Question, questions

PRICE = Price(input_per_mtok=3.0, output_per_mtok=15.0)


def echo_upper(request):
    return {"answer": last_user_json(request)["question"].upper()}


def data(n=24):
    x = questions(*[f"q{i}" for i in range(n)])
    y = np.array([Answer(answer=f"Q{i}") for i in range(n)], dtype=object)
    return x, y


async def program_on(lm, optimizer=None):
    inputs = synalinks.Input(data_model=Question)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm, name="generator")(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="p")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=optimizer or synalinks.optimizers.RandomFewShot())
    return program


def words(text):
    return len(str(text or "").split())


def hand_cost(lm, price):
    """What the scripted LM's requests cost: it counts a word as a token (its prompt's, and its answer's)."""
    total = 0.0
    for request in lm.requests:
        prompt = sum(words(m.get("content")) for m in request.messages)
        completion = words(json.dumps(echo_upper(request)))
        total += price.usd(prompt, completion)
    return total


async def test_cost_usd_equals_the_hand_computation_from_the_price():
    lm = ScriptedLanguageModel(respond=echo_upper, price=PRICE)
    program = await program_on(lm)
    x, y = data()
    history = await program.fit(x=x, y=y, validation_split=0.25, epochs=2, batch_size=6, verbose=0)

    expected = hand_cost(lm, PRICE)
    assert expected > 0
    assert history.history["cost_usd"][-1] == pytest.approx(expected, rel=1e-12)
    # cumulative per epoch; the epochs' own figures add up to it
    assert history.history["cost_usd"][0] <= history.history["cost_usd"][1]
    assert sum(history.history["epoch_cost_usd"]) == pytest.approx(expected, rel=1e-12)
    assert history.history["cost_usd_inference"][-1] == pytest.approx(expected, rel=1e-12)
    assert history.history["unpriced_calls"][-1] == 0
    assert history.spend["cost_usd"] == pytest.approx(expected, rel=1e-12)
    assert history.spend["capped"] is False


async def test_cache_hits_cost_nothing_and_count_as_saved(tmp_path):
    lm = ScriptedLanguageModel(respond=echo_upper, price=PRICE, cache=True, cache_dir=str(tmp_path))
    messages = [{"role": "user", "content": json.dumps({"question": "hello world"})}]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    await lm(messages, schema=schema)
    first = lm.usage.total()
    await lm(messages, schema=schema)
    second = lm.usage.total()
    assert second.cost_usd == first.cost_usd > 0
    assert second.saved_usd == pytest.approx(first.cost_usd)


async def test_judge_calls_are_their_own_phase():
    lm = ScriptedLanguageModel(respond=echo_upper, price=PRICE)
    messages = [{"role": "user", "content": json.dumps({"question": "a b c"})}]
    with lm_phase("judge"):
        await lm(messages)
    assert set(lm.usage.by_phase) == {"judge"}
    assert lm.usage.by_phase["judge"].cost_usd > 0


async def test_an_unknown_price_warns_once_and_is_counted_unpriced_never_zero():
    lm = ScriptedLanguageModel(respond=echo_upper, price=None)
    lm.model = lm.pricing.model = "openai/no-such-model-xyz"
    lm.price_override = None  # looked up again: the table has no price for it
    messages = [{"role": "user", "content": json.dumps({"question": "a"})}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await lm(messages)
        await lm(messages)
    assert sum(issubclass(w.category, UnknownPriceWarning) for w in caught) == 1
    total = lm.usage.total()
    assert total.unpriced_calls == 2 and total.cost_usd == 0.0


def test_the_table_prices_a_listed_model_and_not_a_local_server():
    assert table_price("gpt-4o-mini") == Price(0.15, 0.6, 0.075, source=table_price("gpt-4o-mini").source)
    assert table_price("gpt-4o-mini", "http://127.0.0.1:8000/v1") is None
    assert table_price("no-such-model-xyz") is None


def test_a_price_given_as_a_dict_is_checked():
    lm = synalinks.LanguageModel("openai/x", api_base="http://127.0.0.1:1/v1",
                                 price={"input_per_mtok": 1, "output_per_mtok": 2})
    assert lm.price == Price(1, 2)
    assert synalinks.LanguageModel.from_config(lm.get_config()).price == Price(1, 2)
    with pytest.raises(ValueError, match="unknown key 'input'"):
        synalinks.LanguageModel("openai/x", price={"input": 1, "output_per_mtok": 2})
    with pytest.raises(ValueError, match="output_per_mtok must be"):
        Price(1.0, -1.0)


def test_embedded_models_cost_nothing():
    lm = synalinks.LanguageModel("local/qwen2.5-coder-0.5b-instruct")
    assert lm.price is not None and lm.price.free


# -- caps ---------------------------------------------------------------------------------


def slow_echo(request):
    return echo_upper(request)


@pytest.mark.parametrize("cap", [0.02, 0.05])
async def test_a_capped_run_never_crosses_the_cap_at_concurrency_8(cap):
    # max_tokens bounds what a call can cost, so up to 8 calls' reservations fit under the cap at once
    lm = ScriptedLanguageModel(respond=slow_echo, price=PRICE, concurrency=8, delay_s=0.002, max_tokens=64)
    # bootstrapped demonstrations: each step runs its batch of 8 training examples at once
    program = await program_on(lm, synalinks.optimizers.RandomFewShot(max_metric_calls=400, use_labels=False))
    x, y = data(40)
    history = await program.fit(x=x, y=y, validation_split=0.25, epochs=4, batch_size=8, verbose=0,
                                max_usd=cap)
    spent = hand_cost(lm, PRICE)
    assert history.spend["peak_in_flight"] == 8
    assert history.spend["capped"] is True
    assert history.spend["peak_committed_usd"] <= cap
    assert program.stop_reason == "max_usd"
    assert 0 < spent <= cap
    assert history.spend["cost_usd"] == pytest.approx(spent, rel=1e-12)


async def test_budget_usd_is_the_same_cap():
    lm = ScriptedLanguageModel(respond=slow_echo, price=PRICE, max_tokens=64)
    program = await program_on(lm)
    x, y = data(40)
    history = await program.fit(x=x, y=y, epochs=4, batch_size=8, verbose=0, budget=Budget(usd=0.01))
    assert history.spend["capped"] and 0 < hand_cost(lm, PRICE) <= 0.01
    with pytest.raises(ValueError, match="max_usd must be"):
        await program.fit(x=x, y=y, verbose=0, max_usd=0)


async def test_a_cap_on_a_model_with_no_price_is_refused():
    lm = ScriptedLanguageModel(respond=echo_upper)
    lm.pricing.fix(None)  # no price at all
    program = await program_on(lm)
    x, y = data(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="has no price"):
            await program.fit(x=x, y=y, verbose=0, max_usd=1.0)


async def test_a_run_stopped_by_its_cap_resumes_from_its_backup(tmp_path):
    x, y = data(40)
    lm = ScriptedLanguageModel(respond=echo_upper, price=PRICE, cache=True, cache_dir=str(tmp_path / "cache"),
                               max_tokens=64)
    program = await program_on(lm)
    backup = synalinks.callbacks.BackupAndRestore(backup_dir=tmp_path / "backup", save_freq=1)
    first = await program.fit(x=x, y=y, validation_split=0.25, epochs=3, batch_size=6, verbose=0, max_usd=0.02,
                              callbacks=[backup])
    assert first.spend["capped"] and (tmp_path / "backup" / "latest.program.json").exists()
    spent_first = first.spend["cost_usd"]

    lm2 = ScriptedLanguageModel(respond=echo_upper, price=PRICE, cache=True, cache_dir=str(tmp_path / "cache"),
                                max_tokens=64)
    resumed = await program_on(lm2)
    backup2 = synalinks.callbacks.BackupAndRestore(backup_dir=tmp_path / "backup", save_freq=1)
    second = await resumed.fit(x=x, y=y, validation_split=0.25, epochs=3, batch_size=6, verbose=0, max_usd=1.0,
                               callbacks=[backup2])
    assert not second.spend["capped"] and resumed.stop_reason is None
    assert not (tmp_path / "backup" / "latest.program.json").exists()  # finished: the backup is gone
    # the resumed run counts what the first spent, plus the calls that reached its model (cache hits are free)
    assert lm2.usage.total().cache_hits > 0 and lm2.usage.total().saved_usd > 0
    assert second.spend["cost_usd"] == pytest.approx(spent_first + hand_cost(lm2, PRICE), rel=1e-9)
    assert second.history["cost_usd"][-1] == pytest.approx(second.spend["cost_usd"], rel=1e-9)


async def test_concurrent_reservations_hold_the_cap():
    from promptgym.lm.spend import SpendCap, SpendCapReached

    cap = SpendCap(usd=1.0)
    started = []

    async def call(i):
        await cap.reserve(0.3, "m")
        started.append(i)
        await asyncio.sleep(0.01)
        cap.settle(0.3, 0.2)

    results = await asyncio.gather(*(call(i) for i in range(8)), return_exceptions=True)
    assert cap.spent_usd <= 1.0 and cap.peak_committed_usd <= 1.0
    # 3 fit at once (0.9); two settled (0.4 spent) leave room for a 4th; then nothing fits and none is in flight
    assert len(started) == 4 and cap.spent_usd == pytest.approx(0.8)
    assert sum(isinstance(r, SpendCapReached) for r in results) == 4


def test_weight_training_seconds_count_as_compute_not_dollars():
    from promptgym.lm.usage import LEDGER, record_compute, usage_scope

    before = LEDGER.snapshot()
    with usage_scope() as usage:
        record_compute(2.5)
    assert usage.compute_s == 2.5 and usage.cost_usd == 0.0
    assert LEDGER.since(before)["compute"].compute_s == 2.5


async def test_the_loggers_get_the_dollars_with_the_epoch_scalars():
    from promptgym.core.events import EpochEnd
    from promptgym.training.scalars import event_scalars

    lm = ScriptedLanguageModel(respond=echo_upper, price=PRICE)
    program = await program_on(lm)
    x, y = data(12)
    history = await program.fit(x=x, y=y, validation_split=0.25, epochs=1, batch_size=6, verbose=0)
    step, values = event_scalars(EpochEnd(epoch=0, logs=history.as_rows()[0]))
    assert values["epoch/cost_usd"] == pytest.approx(hand_cost(lm, PRICE), rel=1e-12)
    assert "epoch/cost_usd_inference" in values and "epoch/saved_usd" in values


def test_a_cap_outlives_an_event_loop():
    from promptgym.lm.spend import SpendCap

    cap = SpendCap(usd=1.0)

    async def one_call():
        await cap.reserve(0.1, "m")
        cap.settle(0.1, 0.1)

    asyncio.run(one_call())
    asyncio.run(one_call())
    assert cap.spent_usd == pytest.approx(0.2) and cap.in_flight == 0


async def test_each_call_says_what_it_cost(tmp_path):
    from promptgym.lm.traces import record_traces, stop_recording_traces

    lm = ScriptedLanguageModel(respond=echo_upper, price=PRICE)
    messages = [{"role": "user", "content": json.dumps({"question": "a b"})}]
    record_traces(tmp_path)
    try:
        await lm(messages)
    finally:
        stop_recording_traces()
    request = lm.requests[0]
    expected = PRICE.usd(sum(words(m["content"]) for m in request.messages), words(json.dumps(echo_upper(request))))
    assert lm.last_call_cost_usd == pytest.approx(expected)
    line = json.loads(next(tmp_path.rglob("traces.jsonl")).read_text().splitlines()[0])
    assert line["cost_usd"] == pytest.approx(expected)
