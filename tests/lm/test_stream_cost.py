"""Streamed calls are priced and capped like calls made in one piece (issue 43)."""

from __future__ import annotations

import pytest

import promptgym as pg
from promptgym.lm.language_model import LanguageModel
from promptgym.lm.prices import Price
from promptgym.lm.spend import SpendCap, SpendCapReached
from promptgym.lm.streaming import estimate_prompt_tokens, estimate_tokens
from promptgym.lm.usage import usage_scope
from promptgym.testing import ScriptedLanguageModel
from tests.lm.fake_openai_server import FakeOpenAIServer

MESSAGES = [{"role": "user", "content": "say it now"}]
PRICE = Price(input_per_mtok=2.0, output_per_mtok=10.0)


def by_hand(prompt: int, completion: int) -> float:
    return (prompt * 2.0 + completion * 10.0) / 1_000_000


async def test_a_streamed_call_costs_what_the_same_call_in_one_piece_costs():
    answer = "the quick brown fox jumps"
    streamed = ScriptedLanguageModel(responses=[answer], price=PRICE)
    whole = ScriptedLanguageModel(responses=[answer], price=PRICE)
    with usage_scope() as usage:
        text = (await streamed.stream(MESSAGES).aconsume())["content"]
    assert text == answer
    await whole(MESSAGES)
    # the scripted model counts a word as a token: 3 in, 5 out
    assert usage.cost_usd == pytest.approx(by_hand(3, 5))
    assert usage.cost_usd == pytest.approx(whole.usage.total().cost_usd)
    assert streamed.last_call_cost_usd == pytest.approx(by_hand(3, 5))
    assert (usage.prompt_tokens, usage.completion_tokens, usage.streaming_calls, usage.estimated_calls) == (3, 5, 1, 0)


async def test_a_server_that_sends_no_usage_is_priced_from_the_text():
    answer = "streamed over http without any usage"
    with FakeOpenAIServer(lambda body: answer, stream_usage=False) as server:
        lm = LanguageModel(model="openai/test", api_base=server.url, api_key="k", cache=False, price=PRICE)
        with usage_scope() as usage:
            stream = lm.stream(MESSAGES)
            await stream.aconsume()
    prompt, completion = estimate_prompt_tokens(MESSAGES), estimate_tokens(answer)
    assert (prompt, completion) == (7, 9)  # 10 chars + 4, 36 chars
    assert (usage.prompt_tokens, usage.completion_tokens, usage.estimated_calls) == (prompt, completion, 1)
    assert usage.cost_usd == pytest.approx(by_hand(prompt, completion))


async def test_the_usage_chunk_wins_over_the_estimate():
    with FakeOpenAIServer(lambda body: "a long answer that the estimate would count differently") as server:
        lm = LanguageModel(model="openai/test", api_base=server.url, api_key="k", cache=False, price=PRICE)
        with usage_scope() as usage:
            await lm.stream(MESSAGES).aconsume()
    # the fake server's usage chunk says 11 in, 3 out
    assert (usage.prompt_tokens, usage.completion_tokens, usage.estimated_calls) == (11, 3, 0)
    assert usage.cost_usd == pytest.approx(by_hand(11, 3))


async def test_a_reader_that_leaves_pays_for_what_was_written():
    lm = ScriptedLanguageModel(responses=["one two three four five six"], price=PRICE)
    with usage_scope() as usage:
        stream = lm.stream(MESSAGES)
        await stream.__anext__()
        await stream.__anext__()
        await stream.aclose()
    assert lm.streams.stopped == 1
    written = estimate_tokens("one two ")
    assert (usage.calls, usage.streaming_calls, usage.completion_tokens, usage.estimated_calls) == (1, 0, written, 1)
    assert usage.cost_usd == pytest.approx(by_hand(estimate_prompt_tokens(MESSAGES), written))


async def test_a_cap_too_small_for_the_call_stops_it_before_it_starts():
    lm = ScriptedLanguageModel(responses=["never sent"], price=PRICE, max_tokens=100)
    cap = SpendCap(usd=by_hand(0, 50))  # half of max_tokens' answer
    with cap.active(), pytest.raises(SpendCapReached):
        await lm.stream(MESSAGES).aconsume()
    assert lm.requests == [] and cap.spent_usd == 0 and cap.in_flight == 0


async def test_a_cap_stops_a_stream_between_chunks_before_it_crosses():
    # the server writes far past max_tokens (the scripted one ignores it): the reservation can't cover it
    lm = ScriptedLanguageModel(responses=[" ".join(["word"] * 400)], price=PRICE, max_tokens=20)
    cap = SpendCap(usd=lm.estimate_usd(lm._request(MESSAGES, None, None, None, {})) + by_hand(0, 100))
    pieces = []
    with cap.active(), usage_scope() as usage:
        with pytest.raises(SpendCapReached, match="streamed answer"):
            async for chunk in lm.stream(MESSAGES):
                pieces.append(chunk["content"])
    assert 0 < len(pieces) < 400 and lm.streams.stopped == 1
    assert cap.reached is False and cap.in_flight == 0 and cap.reserved_usd == pytest.approx(0)
    assert 0 < cap.spent_usd <= cap.limit_usd
    assert usage.cost_usd == pytest.approx(cap.spent_usd)


async def test_concurrent_streams_under_a_cap_never_cross_it():
    import asyncio

    lm = ScriptedLanguageModel(responses=["a b c d e f g h"], price=PRICE, max_tokens=16, concurrency=8)
    one = lm.estimate_usd(lm._request(MESSAGES, None, None, None, {}))
    cap = SpendCap(usd=one * 5.5)

    async def read() -> str:
        return (await lm.stream(MESSAGES).aconsume())["content"]

    with cap.active():
        results = await asyncio.gather(*(read() for _ in range(40)), return_exceptions=True)
    done = [r for r in results if isinstance(r, str)]
    assert done and len(done) < 40
    assert all(isinstance(r, (str, SpendCapReached)) for r in results)
    assert cap.spent_usd <= cap.limit_usd and cap.peak_committed_usd <= cap.limit_usd + 1e-12
    assert cap.spent_usd == pytest.approx(len(done) * by_hand(3, 8))


class Question(pg.DataModel):
    question: str


class Answer(pg.DataModel):
    answer: str


async def test_program_stream_is_priced():
    lm = ScriptedLanguageModel(responses=[{"answer": "Paris is the capital"}], price=PRICE)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm)(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="qa")
    with usage_scope() as usage:
        async with program.stream({"question": "capital?"}) as stream:
            "".join([piece async for piece in stream])
    total = lm.usage.total()
    assert total.streaming_calls == 1 and total.cost_usd > 0
    assert total.cost_usd == pytest.approx(by_hand(total.prompt_tokens, total.completion_tokens))
    assert usage.cost_usd == pytest.approx(total.cost_usd)


async def test_serve_counts_a_streamed_answers_dollars_per_program():
    import json

    from fastapi.testclient import TestClient

    from promptgym.serving import create_app
    from promptgym.serving.metrics import sample_value
    from tests.serving.programs import qa_program, shouting_model

    priced = await qa_program("priced", language_model=shouting_model(price=PRICE))
    app = create_app([priced])
    body = {"model": "priced", "stream": True, "messages": [{"role": "user", "content": json.dumps({"question": "a b"})}]}
    assert TestClient(app).post("/v1/chat/completions", json=body).status_code == 200
    tokens = {kind: sample_value(app.state.metrics, "promptgym_tokens_total", program="priced", route="chat", kind=kind)
              for kind in ("prompt", "completion")}
    assert tokens["completion"] > 0
    assert sample_value(app.state.metrics, "promptgym_cost_usd_total", program="priced", route="chat") == \
        pytest.approx(by_hand(tokens["prompt"], tokens["completion"]))
