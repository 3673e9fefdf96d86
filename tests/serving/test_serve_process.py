"""``promptgym serve`` as a real process: answers, refuses a wrong key, and finishes requests in flight on SIGTERM."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import promptgym as pg
from promptgym.cli.commands.serve import listening_socket
from promptgym.traces import TraceStore
from tests.lm.fake_openai_server import FakeOpenAIServer
from tests.serving.process import REPO, serve_process
from tests.serving.programs import qa_program


def slow_answer(body: dict) -> str:
    time.sleep(0.5)  # long enough that SIGTERM lands while requests are in flight
    question = json.loads(body["messages"][-1]["content"])["question"]
    return json.dumps({"answer": question.upper()})


@pytest.fixture
def fake_server():
    with FakeOpenAIServer(slow_answer) as server:
        yield server


async def save_program(fake_server, path, name="qa") -> str:
    lm = pg.LanguageModel(model="openai/fake", api_base=fake_server.url, api_key="unused", cache=False)
    (await qa_program(name=name, language_model=lm)).save(str(path))
    return str(path)


async def test_sigterm_lets_every_accepted_request_finish(fake_server, tmp_path) -> None:
    program = await save_program(fake_server, tmp_path / "qa.json")
    recorded = ["--record", str(tmp_path / "rec"), "--redact", "inputs.context"]
    with serve_process([program, "--api-key-env", "SERVE_TEST_KEY", *recorded],
                       env={"SERVE_TEST_KEY": "k-123"}) as server:
        headers = {"Authorization": "Bearer k-123"}
        assert httpx.post(f"{server.url}/v1/programs/qa/predict", json={"question": "x"}).status_code == 401
        started = threading.Barrier(9)

        def ask(index: int) -> httpx.Response:
            started.wait()
            return httpx.post(f"{server.url}/v1/programs/qa/predict", json={"question": f"q{index}"}, headers=headers,
                              timeout=30)

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(ask, index) for index in range(8)]
            started.wait()
            deadline = time.monotonic() + 10
            while len(fake_server.requests) < 8 and time.monotonic() < deadline:
                time.sleep(0.01)  # every request has reached the model: all are in flight
            status = server.stop()
            responses = [future.result() for future in futures]
    assert [response.status_code for response in responses] == [200] * 8
    assert sorted(response.json()["answer"] for response in responses) == sorted(f"Q{i}" for i in range(8))
    assert status in (0, -15)  # uvicorn re-raises the SIGTERM it handled once it has finished
    assert "Traceback" not in server.output and "k-123" not in server.output
    assert server.output.count("POST /v1/programs/qa/predict 200") == 8
    traces = TraceStore(tmp_path / "rec" / "traces.db").traces()  # every answered call was recorded before it left
    assert sorted(trace.id for trace in traces) == sorted(r.headers["x-promptgym-trace-id"] for r in responses)
    assert all("context" not in trace.inputs for trace in traces)


async def test_mcp_stdio_lists_and_calls_the_program(fake_server, tmp_path) -> None:
    program = await save_program(fake_server, tmp_path / "qa.json")
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "promptgym.cli.main", "serve", program,
                                                                     "--mcp", "stdio"],
                                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=str(REPO))
    async with Client(parameters) as client:
        tools = (await client.list_tools()).tools
        result = await client.call_tool("qa", {"question": "tool"})
        bad = await client.call_tool("qa", {"question": 1})
    assert [tool.name for tool in tools] == ["qa"] and tools[0].input_schema["required"] == ["question"]
    assert result.structured_content == {"answer": "TOOL"} and not result.is_error
    assert bad.is_error and "arguments.question" in bad.content[0].text


def test_the_listening_socket_is_tcp_so_responses_are_not_held_by_nagle() -> None:
    sock = listening_socket("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP  # asyncio then sets TCP_NODELAY on each connection
    finally:
        sock.close()


async def test_mcp_over_streamable_http_behind_the_api_key(fake_server, tmp_path) -> None:
    program = await save_program(fake_server, tmp_path / "qa.json")
    with serve_process([program, "--mcp", "http", "--api-key-env", "SERVE_TEST_KEY"],
                       env={"SERVE_TEST_KEY": "k-456"}) as server:
        assert httpx.post(f"{server.url}/mcp", json={}).status_code == 401
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer k-456"}) as http:
            async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
                result = await client.call_tool("qa", {"question": "over http"})
    assert result.structured_content == {"answer": "OVER HTTP"}
