"""serve --record: every served call a trace (header and OpenAI id), feedback through HTTP and MCP."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from mcp.client.client import Client

from promptgym.datasets import from_traces
from promptgym.serving import ServedProgram, ServeSettings
from promptgym.serving.mcp_server import FEEDBACK_TOOL, TRACE_META, mcp_server
from promptgym.serving.recording import redact_fields
from promptgym.serving.context import ServerContext
from promptgym.traces import TraceStore
from tests.serving.conftest import client_for


def flushed(client) -> None:
    """Commit the traces the recorder's writer still holds (it writes behind the answers)."""
    client.app.state.recorder.flush()


def test_a_predict_call_is_stored_and_its_id_comes_back_in_the_header(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path / "rec"))
    response = client.post("/v1/programs/qa/predict", json={"question": "hi"})
    assert response.status_code == 200 and response.json() == {"answer": "HI"}
    trace_id = response.headers["x-promptgym-trace-id"]
    flushed(client)
    trace = TraceStore(tmp_path / "rec" / "traces.db").get(trace_id)
    assert (trace.program, trace.inputs, trace.outputs) == ("qa", {"question": "hi", "context": ""}, {"answer": "HI"})
    assert [step["module"] for step in trace.modules] == [qa.modules[-1].name]
    assert trace.modules[0]["outputs"] == {"answer": "HI"} and trace.latency_ms > 0
    assert len(trace.version) == 12 and trace.model


def test_a_chat_answer_is_named_after_its_trace(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path))
    response = client.post("/v1/chat/completions", json={"model": "qa", "messages": [
        {"role": "user", "content": json.dumps({"question": "yo"})}]})
    trace_id = response.headers["x-promptgym-trace-id"]
    assert response.json()["id"] == f"chatcmpl-{trace_id}"
    flushed(client)
    assert TraceStore(tmp_path / "traces.db").get(trace_id).outputs == {"answer": "YO"}


def test_without_record_nothing_is_stored_and_feedback_is_refused(qa, tmp_path):
    client = client_for([qa])
    response = client.post("/v1/programs/qa/predict", json={"question": "hi"})
    assert "x-promptgym-trace-id" not in response.headers
    refused = client.post("/v1/feedback", json={"trace_id": "x", "rating": 1})
    assert refused.status_code == 404 and "--record" in refused.json()["error"]["message"]


def test_feedback_rates_and_corrects_a_trace_and_refuses_what_does_not_fit(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path))
    trace_id = client.post("/v1/programs/qa/predict", json={"question": "2+2"}).headers["x-promptgym-trace-id"]
    ok = client.post("/v1/feedback", json={"trace_id": trace_id, "rating": 0, "comment": "wrong sum"})
    assert ok.status_code == 200 and ok.json()["rating"] == 0.0
    bad = client.post("/v1/feedback", json={"trace_id": trace_id, "correction": {"answer": 4}})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "correction.answer"
    missing = client.post("/v1/feedback", json={"trace_id": trace_id, "correction": {}})
    assert missing.status_code == 422 and missing.json()["error"]["param"] == "correction.answer"
    unknown = client.post("/v1/feedback", json={"trace_id": "no-such-trace", "rating": 1})
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "trace_id"
    extra = client.post("/v1/feedback", json={"trace_id": trace_id, "stars": 5})
    assert extra.status_code == 422 and extra.json()["error"]["param"] == "stars"
    assert client.post("/v1/feedback", json={"trace_id": trace_id, "correction": {"answer": "4"}}).status_code == 200
    assert client.post("/v1/feedback", json={"trace_id": trace_id, "correction": {"answer": "four"}}).status_code == 200
    flushed(client)
    trace = TraceStore(tmp_path / "traces.db").get(trace_id)
    assert (trace.rating, trace.correction, trace.comments) == (0.0, {"answer": "four"}, ["wrong sum"])
    assert len(trace.feedback) == 3  # a second correction is kept as well; the latest is the label


def test_feedback_needs_the_key_like_every_route(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path), api_key="sekret")
    assert client.post("/v1/feedback", json={"trace_id": "x", "rating": 1}).status_code == 401


def test_a_failed_call_is_stored_with_its_error(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path))
    response = client.post("/v1/programs/qa/predict", json={"question": "fail"})
    assert response.status_code >= 500
    flushed(client)
    (trace,) = TraceStore(tmp_path / "traces.db").traces()
    assert trace.outputs is None and "scripted failure" in trace.error
    assert response.headers["x-promptgym-trace-id"] == trace.id


def test_redacted_fields_never_reach_the_store(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path), redact=redact_fields(["inputs.question", "modules.inputs"]))
    client.post("/v1/programs/qa/predict", json={"question": "my secret", "context": "c"})
    flushed(client)
    raw = (tmp_path / "traces.db").read_bytes() + b"".join(path.read_bytes() for path in tmp_path.glob("traces.db-*"))
    assert b"my secret" not in raw
    (trace,) = TraceStore(tmp_path / "traces.db").traces()
    assert trace.inputs == {"context": "c"} and "inputs" not in trace.modules[0]


def test_concurrent_calls_each_leave_one_trace(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path), concurrency=16)
    with ThreadPoolExecutor(16) as pool:
        ids = list(pool.map(lambda i: client.post("/v1/programs/qa/predict", json={"question": f"q{i}"})
                            .headers["x-promptgym-trace-id"], range(200)))
    flushed(client)
    store = TraceStore(tmp_path / "traces.db")
    assert len(set(ids)) == 200 and store.count() == 200
    assert sorted(trace.inputs["question"] for trace in store.traces()) == sorted(f"q{i}" for i in range(200))


async def test_mcp_calls_carry_their_trace_id_and_the_feedback_tool_takes_it(qa, tmp_path):
    state = ServerContext(programs={"qa": ServedProgram.of(qa)}, settings=ServeSettings(record=str(tmp_path)))
    async with Client(mcp_server(state)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        called = await client.call_tool("qa", {"question": "hi"})
        trace_id = called.meta[TRACE_META]
        good = await client.call_tool(FEEDBACK_TOOL.name, {"trace_id": trace_id, "rating": 1})
        unknown = await client.call_tool(FEEDBACK_TOOL.name, {"trace_id": "nope", "rating": 1})
        bad = await client.call_tool(FEEDBACK_TOOL.name, {"trace_id": trace_id, "correction": {"answer": 1}})
    assert names == ["qa", FEEDBACK_TOOL.name]
    assert not good.is_error and TraceStore(tmp_path / "traces.db").get(trace_id).rating == 1.0
    assert unknown.is_error and "no trace 'nope'" in unknown.content[0].text
    assert bad.is_error and "correction.answer" in bad.content[0].text


def test_corrected_traces_come_back_as_training_data_without_the_programs_code(qa, tmp_path):
    client = client_for([qa], record=str(tmp_path))
    ids = [client.post("/v1/programs/qa/predict", json={"question": f"q{i}"}).headers["x-promptgym-trace-id"]
           for i in range(4)]
    client.post("/v1/feedback", json={"trace_id": ids[1], "correction": {"answer": "fixed"}})
    client.post("/v1/feedback", json={"trace_id": ids[3], "rating": 1})
    flushed(client)
    x, y = from_traces(tmp_path, program="qa", min_rating=1)
    assert [item.get("question") for item in x] == ["q1", "q3"]
    assert [item.get("answer") for item in y] == ["fixed", "Q3"]
    assert sorted(type(x[0]).model_fields) == ["context", "question"]


def test_a_store_that_cannot_write_loses_traces_it_counts_and_never_fails_an_answer(qa, tmp_path, monkeypatch):
    client = client_for([qa], record=str(tmp_path))
    recorder = client.app.state.recorder

    def full_disk(rows):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recorder.store, "record_many", full_disk)
    answers = [client.post("/v1/programs/qa/predict", json={"question": f"q{i}"}) for i in range(3)]
    flushed(client)
    assert [answer.status_code for answer in answers] == [200, 200, 200] and recorder.lost == 3
    assert "promptgym_traces_lost 3.0" in client.get("/metrics").text
