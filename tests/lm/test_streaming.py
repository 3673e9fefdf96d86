"""Streamed answers: deltas in order, usage at the end, and a reader that leaves stops the generation."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from promptgym.lm.engine import LMRequest
from promptgym.lm.language_model import LanguageModel
from promptgym.lm import local_engine
from promptgym.lm.local_engine import LlamaCppEngine
from promptgym.lm.usage import usage_scope
from promptgym.testing import ScriptedLanguageModel
from tests.lm.fake_openai_server import FakeOpenAIServer

MESSAGES = [{"role": "user", "content": "say it"}]


async def test_scripted_stream_joins_to_the_answer_and_counts_its_tokens():
    lm = ScriptedLanguageModel(responses=["the quick brown fox"])
    with usage_scope() as usage:
        stream = lm.stream(MESSAGES)
        pieces = [chunk["content"] async for chunk in stream]
    assert pieces == ["the ", "quick ", "brown ", "fox"]
    assert stream.content == "the quick brown fox" and stream.finish_reason == "stop"
    assert (stream.prompt_tokens, stream.completion_tokens) == (2, 4)
    assert (usage.calls, usage.streaming_calls, usage.prompt_tokens, usage.completion_tokens) == (1, 1, 2, 4)
    assert lm.streams.finished == 1


async def test_closing_a_scripted_stream_stops_it_and_frees_the_slot():
    lm = ScriptedLanguageModel(responses=["one two three four five"], concurrency=1)
    stream = lm.stream(MESSAGES)
    assert (await stream.__anext__())["content"] == "one "
    await stream.aclose()
    assert (lm.streams.stopped, lm.streams.finished, lm.streams.pieces) == (1, 0, 1)
    # concurrency 1: a second call gets the slot only if the closed stream gave it back
    assert await asyncio.wait_for(lm(MESSAGES), timeout=10) == "one two three four five"


async def test_a_cached_answer_streams_as_one_chunk():
    lm = ScriptedLanguageModel(responses=["a b c"], cache=True)
    assert [c["content"] async for c in lm.stream(MESSAGES)] == ["a ", "b ", "c"]
    again = lm.stream(MESSAGES)
    assert [c["content"] async for c in again] == ["a b c"]
    assert len(lm.requests) == 1 and again.completion_tokens == 3


async def test_a_model_failing_before_its_first_chunk_streams_from_its_fallback():
    from promptgym.lm.errors import LMConnectionError

    backup = ScriptedLanguageModel(responses=["from the fallback"])
    lm = ScriptedLanguageModel(responses=[LMConnectionError("down")], fallback=backup)
    assert "".join([c["content"] async for c in lm.stream(MESSAGES)]) == "from the fallback"
    assert backup.streams.finished == 1


# -- the embedded engine, with llama.cpp replaced by a token generator -------------------------


class FakeLlama:
    """Streams ``tokens`` like llama-cpp-python's create_chat_completion(stream=True)."""

    def __init__(self, tokens: list[str], delay_s: float = 0.0) -> None:
        self.tokens = tokens
        self.delay_s = delay_s  # between tokens, as a real model takes
        self.produced = 0
        self.closed = False
        self.n_tokens = 0
        self.may_continue = threading.Event()
        self.may_continue.set()
        self.threads: list[int] = []  # the thread of each call

    def create_chat_completion(self, stream: bool = False, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        if not stream:
            self.may_continue.wait(10)
            return {"choices": [{"message": {"content": "".join(self.tokens)}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": len(self.tokens)}}

        def chunks() -> Any:
            try:
                yield {"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}
                for token in self.tokens:
                    self.may_continue.wait(10)
                    if self.delay_s:
                        time.sleep(self.delay_s)
                    self.produced += 1
                    self.n_tokens = 7 + self.produced
                    yield {"choices": [{"delta": {"content": token}, "finish_reason": None}]}
                yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}
            finally:
                self.closed = True

        return chunks()

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(range(self.produced))


def fake_engine(tokens: list[str], delay_s: float = 0.0) -> tuple[LlamaCppEngine, FakeLlama]:
    backend = LlamaCppEngine(Path("fake.gguf"))
    backend._llama = FakeLlama(tokens, delay_s)
    return backend, backend._llama


async def test_embedded_engine_streams_token_by_token_with_usage():
    backend, llama = fake_engine(["Hel", "lo", " world"])
    chunks = [chunk async for chunk in backend.stream(LMRequest(messages=MESSAGES))]
    assert [chunk.content for chunk in chunks[:-1]] == ["Hel", "lo", " world"]
    assert (chunks[-1].finish_reason, chunks[-1].completion_tokens, chunks[-1].prompt_tokens) == ("stop", 3, 7)
    assert llama.closed and not backend._lock.locked()


async def test_embedded_engine_stops_at_once_when_the_reader_leaves():
    backend, llama = fake_engine([f"t{i} " for i in range(1000)])
    stream = backend.stream(LMRequest(messages=MESSAGES))
    assert (await stream.__anext__()).content == "t0 "
    await stream.aclose()
    # aclose returns once the worker is out: the context is free and llama.cpp's generator is closed
    assert llama.closed and not backend._lock.locked()
    assert llama.produced < 1000


async def test_the_embedded_engine_computes_the_second_token_only_once_the_first_is_taken(monkeypatch):
    monkeypatch.setattr(local_engine, "FIRST_TOKEN_HANDOFF_S", 30.0)  # no time limit on the handoff here
    backend, llama = fake_engine(["a", "b", "c"])
    stream = backend.stream(LMRequest(messages=MESSAGES))
    assert (await stream.__anext__()).content == "a"
    await asyncio.sleep(0.05)  # the worker would have written all three by now if it did not wait
    assert llama.produced == 1
    assert [chunk.content async for chunk in stream][:2] == ["b", "c"]
    assert llama.closed and not backend._lock.locked()


async def test_a_reader_leaving_after_the_first_token_does_not_wait_for_the_handoff(monkeypatch):
    monkeypatch.setattr(local_engine, "FIRST_TOKEN_HANDOFF_S", 30.0)
    backend, llama = fake_engine(["a", "b", "c"])
    stream = backend.stream(LMRequest(messages=MESSAGES))
    assert (await stream.__anext__()).content == "a"
    await asyncio.wait_for(stream.aclose(), timeout=10)  # not 30 s: leaving ends the worker's wait
    assert llama.closed and not backend._lock.locked() and llama.produced == 1


async def test_a_cancelled_reader_stops_the_embedded_engine():
    backend, llama = fake_engine([f"t{i} " for i in range(1000)])
    lm = LanguageModel(model="local/smollm2-135m-instruct", cache=False)
    lm._engine = backend
    got_one = asyncio.Event()

    async def read() -> None:
        async for _ in lm.stream(MESSAGES):
            got_one.set()
            llama.may_continue.clear()  # the engine waits inside its next token: the reader leaves meanwhile

    task = asyncio.create_task(read())
    await asyncio.wait_for(got_one.wait(), timeout=10)
    task.cancel()
    llama.may_continue.set()
    await asyncio.gather(task, return_exceptions=True)
    for _ in range(500):  # the worker leaves at its next token
        if llama.closed and not backend._lock.locked():
            break
        await asyncio.sleep(0.01)
    assert llama.closed and not backend._lock.locked()
    assert llama.produced < 1000


async def test_a_stream_waiting_for_the_engine_gives_up_when_closed():
    backend, llama = fake_engine(["never"])
    backend._lock.acquire()  # another call holds the context
    try:
        stream = backend.stream(LMRequest(messages=MESSAGES))
        reader = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.05)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await stream.aclose()
    finally:
        backend._lock.release()
    assert llama.produced == 0


async def test_every_call_of_the_embedded_engine_runs_on_its_one_thread():
    # llama.cpp's OpenMP gives each calling thread its own team of compute threads: one caller, one team
    backend, llama = fake_engine(["a", "b"])
    streams = [[chunk.content async for chunk in backend.stream(LMRequest(messages=MESSAGES))] for _ in range(2)]
    llama.may_continue.clear()  # three calls at once: each waits for the one before it
    calls = asyncio.gather(*(backend.complete(LMRequest(messages=MESSAGES)) for _ in range(3)))
    await asyncio.sleep(0.05)
    llama.may_continue.set()
    answers = await calls
    assert streams[0][:2] == ["a", "b"] and [answer.content for answer in answers] == ["ab"] * 3
    assert len(llama.threads) == 5 and len(set(llama.threads)) == 1
    assert llama.threads[0] != threading.main_thread().ident


async def test_a_stream_queued_behind_another_is_dropped_at_once_when_its_reader_leaves():
    backend, llama = fake_engine(["x", "y"])
    llama.may_continue.clear()  # the first stream holds the engine's thread until released
    first = backend.stream(LMRequest(messages=MESSAGES))
    reading = asyncio.ensure_future(first.__anext__())
    await asyncio.sleep(0.05)
    second = backend.stream(LMRequest(messages=MESSAGES))
    waiting = asyncio.ensure_future(second.__anext__())
    await asyncio.sleep(0.05)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await asyncio.wait_for(second.aclose(), timeout=5)  # does not wait for the first stream (blocked for 10 s)
    assert not reading.done() and len(llama.threads) == 1  # the second never reached llama.cpp
    llama.may_continue.set()
    assert (await reading).content == "x"
    await first.aclose()


# -- an OpenAI-compatible server -------------------------------------------------------------------


async def test_openai_engine_streams_deltas_and_the_usage_of_the_last_event():
    with FakeOpenAIServer(lambda body: "streamed over http") as server:
        lm = LanguageModel(model="openai/test", api_base=server.url, api_key="k", cache=False)
        stream = lm.stream(MESSAGES)
        pieces = [chunk["content"] async for chunk in stream]
        sent = server.requests[-1]
    assert pieces == ["streamed ", "over ", "http"]
    assert (stream.finish_reason, stream.prompt_tokens, stream.completion_tokens) == ("stop", 11, 3)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_openai_engine_streams_a_structured_answer():
    with FakeOpenAIServer(lambda body: json.dumps({"answer": "Paris, France"})) as server:
        lm = LanguageModel(model="openai/test", api_base=server.url, api_key="k", cache=False)
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
        stream = lm.stream(MESSAGES, schema=schema)
        await stream.aconsume()
        assert json.loads(stream.content) == {"answer": "Paris, France"}
        assert server.requests[-1]["response_format"]["type"] == "json_schema"


async def test_closing_an_openai_stream_drops_the_connection():
    answers = iter(["word " * 2000, "short"])
    with FakeOpenAIServer(lambda body: next(answers), stream_delay_s=0.002) as server:
        lm = LanguageModel(model="openai/test", api_base=server.url, api_key="k", cache=False, concurrency=1)
        stream = lm.stream(MESSAGES)
        await stream.__anext__()
        await stream.aclose()
        for _ in range(1000):  # the server notices at its next write
            if server.streams_broken:
                break
            await asyncio.sleep(0.01)
        assert (server.streams_broken, server.streams_finished) == (1, 0)
        # its one slot is free again
        assert (await asyncio.wait_for(lm.stream(MESSAGES).aconsume(), timeout=30))["content"] == "short"
