"""serve streams chat completions as the model writes them; a client that leaves frees its slot at once."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any, Iterator

import httpx
import openai
import pytest
import uvicorn

from promptgym.cli.commands.serve import listening_socket
from promptgym.lm.language_model import LanguageModel
from promptgym.serving import ServeSettings, create_app
from promptgym.testing import ScriptedLanguageModel
from promptgym.traces import TraceStore
from tests.lm.fake_openai_server import FakeOpenAIServer
from tests.lm.test_streaming import fake_engine
from tests.serving.programs import qa_program

LONG = " ".join(["word"] * 400)


def ask(question: str, model: str = "qa", **extra: Any) -> dict[str, Any]:
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": json.dumps({"question": question})}],
            **extra}


def events_of(text: str) -> list[Any]:
    data = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    return [item if item == "[DONE]" else json.loads(item) for item in data]


def contents(events: list[Any]) -> list[str]:
    return [event["choices"][0]["delta"]["content"] for event in events[1:]
            if isinstance(event, dict) and event.get("choices") and "content" in event["choices"][0]["delta"]]


async def test_a_program_streams_its_last_field_in_order_then_the_end(qa) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_app([qa]))
    response = client.post("/v1/chat/completions", json=ask("why is the sky blue"))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response.text)
    assert events[0]["object"] == "chat.completion.chunk"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert contents(events) == ["WHY ", "IS ", "THE ", "SKY ", "BLUE"]
    last = events[-2]
    assert last["choices"][0]["finish_reason"] == "stop" and last["usage"]["completion_tokens"] > 0
    assert events[-1] == "[DONE]" and len({event["id"] for event in events[:-1]}) == 1


async def test_the_role_and_the_first_piece_leave_in_one_write(qa) -> None:
    app = create_app([qa])
    request = json.dumps(ask("why is the sky blue")).encode()
    received = [{"type": "http.request", "body": request, "more_body": False}]
    bodies: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return received.pop(0) if received else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            bodies.append(message["body"])

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
             "query_string": b"", "root_path": "", "headers": [(b"content-type", b"application/json"),
                                                                (b"content-length", str(len(request)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    await app(scope, receive, send)
    first = events_of(bodies[0].decode())
    assert [event["choices"][0]["delta"] for event in first] == [{"role": "assistant", "content": ""},
                                                                 {"content": "WHY "}]
    assert contents(events_of(b"".join(bodies).decode())) == ["WHY ", "IS ", "THE ", "SKY ", "BLUE"]


async def test_include_usage_sends_a_usage_chunk_after_the_finish(qa) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_app([qa]))
    events = events_of(client.post("/v1/chat/completions",
                                   json=ask("two words", stream_options={"include_usage": True})).text)
    finish, usage = events[-3], events[-2]
    assert finish["choices"][0]["finish_reason"] == "stop" and "usage" not in finish
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == \
        usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"] > 0


async def test_the_openai_client_reads_the_deltas_of_a_program_and_of_a_model(qa) -> None:
    direct = ScriptedLanguageModel(responses=["plain text answer"], model="scripted/direct")
    app = create_app([qa], models=[direct])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        client = openai.AsyncOpenAI(api_key="unused", base_url="http://test/v1", http_client=http)
        stream = await client.chat.completions.create(model="qa", stream=True, stream_options={"include_usage": True},
                                                      messages=[{"role": "user", "content": '{"question": "a b"}'}])
        chunks = [chunk async for chunk in stream]
        model_stream = await client.chat.completions.create(model="scripted/direct", stream=True,
                                                            messages=[{"role": "user", "content": "hello"}])
        model_text = "".join([chunk.choices[0].delta.content or "" async for chunk in model_stream if chunk.choices])
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == "A B"
    assert chunks[-1].usage.completion_tokens > 0 and chunks[-2].choices[0].finish_reason == "stop"
    assert model_text == "plain text answer"


async def test_a_failure_before_the_first_piece_is_an_http_error(qa) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_app([qa]))
    response = client.post("/v1/chat/completions", json=ask("fail"))
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_error"
    assert client.app.state.admission.admitted == 0


async def test_a_streamed_answer_is_recorded_at_its_end_under_the_id_in_its_header(qa, tmp_path) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_app([qa], settings=ServeSettings(record=str(tmp_path))))
    response = client.post("/v1/chat/completions", json=ask("hello there"))
    trace_id = response.headers["x-promptgym-trace-id"]
    assert events_of(response.text)[0]["id"] == f"chatcmpl-{trace_id}"
    client.app.state.recorder.flush()
    trace = TraceStore(tmp_path / "traces.db").get(trace_id)
    assert (trace.inputs["question"], trace.outputs, trace.error) == ("hello there", {"answer": "HELLO THERE"}, None)
    assert trace.completion_tokens > 0 and trace.modules[0]["outputs"] == {"answer": "HELLO THERE"}


# -- a real server: clients that leave mid-stream ------------------------------------------------


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def wait_for(condition: Any, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        time.sleep(0.005)
    pytest.fail(f"never happened: {what}")


def read_first_piece_and_leave(url: str, body: dict[str, Any]) -> str:
    with httpx.Client(timeout=30) as http, http.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content": "w' in line:
                return line  # leaving the block closes the connection mid-answer
    raise AssertionError("no content arrived")


async def test_a_client_leaving_mid_stream_frees_its_slot_and_stops_the_model(tmp_path) -> None:
    lm = ScriptedLanguageModel(respond=lambda request: {"answer": LONG}, stream_delay_s=0.005)
    app = create_app([await qa_program(language_model=lm)], settings=ServeSettings(record=str(tmp_path)))
    with served(app) as url:
        read_first_piece_and_leave(url, ask("long"))
        wait_for(lambda: lm.streams.stopped == 1, "the model's stream stopped")
        wait_for(lambda: app.state.admission.admitted == 0, "the slot given back")
        assert lm.streams.finished == 0 and lm.streams.pieces < 400
        assert httpx.get(f"{url}/healthz").json()["running"] == 0
    app.state.recorder.flush()
    [trace] = TraceStore(tmp_path / "traces.db").traces()
    assert trace.outputs is None and "left before the end" in trace.error


async def test_through_an_openai_compatible_server_a_client_leaving_drops_the_upstream_stream() -> None:
    with FakeOpenAIServer(lambda body: LONG, stream_delay_s=0.005) as upstream:
        model = LanguageModel(model="openai/test", api_base=upstream.url, api_key="k", cache=False)
        app = create_app([], models=[model])
        with served(app) as url:
            body = {"model": "openai/test", "stream": True, "messages": [{"role": "user", "content": "go"}]}
            read_first_piece_and_leave(url, body)
            wait_for(lambda: app.state.admission.admitted == 0, "the slot given back")
            wait_for(lambda: upstream.streams_broken == 1, "the upstream stream closed")
            short = {**body, "stream_options": {"include_usage": True}}
            upstream.answer = lambda body: "all of it"
            events = events_of(httpx.post(f"{url}/v1/chat/completions", json=short, timeout=30).text)
        assert "".join(contents(events)) == "all of it" and events[-2]["usage"]["prompt_tokens"] == 11
        assert upstream.streams_finished == 1


async def test_an_embedded_model_served_directly_stops_before_its_next_token_when_the_client_leaves() -> None:
    # 1 ms a token: 100 s to write them all, so only a stop that works ends it within the test's wait
    backend, llama = fake_engine([f"w{i} " for i in range(100_000)], delay_s=0.001)
    model = LanguageModel(model="local/smollm2-135m-instruct", cache=False)
    model._engine = backend
    app = create_app([], models=[model])
    with served(app) as url:
        body = {"model": "local/smollm2-135m-instruct", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        read_first_piece_and_leave(url, body)
        wait_for(lambda: llama.closed and not backend._lock.locked(), "llama.cpp's generator closed, its context free")
        wait_for(lambda: app.state.admission.admitted == 0, "the slot given back")
    assert llama.produced < 100_000


class FailingMidAnswer:
    """A backend whose stream fails after its first piece."""

    concurrency = 1

    async def complete(self, request: Any) -> Any:
        raise AssertionError("not called")

    async def stream(self, request: Any) -> Any:
        from promptgym.lm.engine import LMChunk
        from promptgym.lm.errors import LMConnectionError

        yield LMChunk(content="half ")
        raise LMConnectionError("the server went away")


async def test_a_model_failing_mid_answer_ends_the_stream_with_an_error_event() -> None:
    from fastapi.testclient import TestClient

    model = ScriptedLanguageModel(responses=["unused"], model="scripted/flaky")
    model._engine = FailingMidAnswer()
    client = TestClient(create_app([], models=[model]))
    response = client.post("/v1/chat/completions", json={"model": "scripted/flaky", "stream": True,
                                                          "messages": [{"role": "user", "content": "go"}]})
    events = events_of(response.text)
    assert response.status_code == 200 and contents(events) == ["half "]
    assert "went away" in events[-1]["error"]["message"] and events[-1]["error"]["code"] == "model_error"
    assert client.app.state.admission.admitted == 0


async def test_a_stream_past_the_queue_is_refused_with_429(qa) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_app([qa], settings=ServeSettings(concurrency=1, queue=0)))
    client.app.state.admission.admitted = 1  # one request already running
    response = client.post("/v1/chat/completions", json=ask("q"))
    assert response.status_code == 429 and response.headers["retry-after"] == "1"
