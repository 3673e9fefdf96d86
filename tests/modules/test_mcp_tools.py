"""MultiServerMCPClient against a small MCP server, over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import promptgym as pg  # noqa: E402
from promptgym.core.local_server import free_port  # noqa: E402
from promptgym.core.serialization import deserialize_object, serialize_object  # noqa: E402
from promptgym.testing import ScriptedLanguageModel  # noqa: E402
from promptgym.modules.mcp_tools import MultiServerMCPClient  # noqa: E402

SERVER = str(Path(__file__).resolve().parent.parent / "fixtures" / "mcp_math_server.py")
STDIO = {"transport": "stdio", "command": sys.executable, "args": [SERVER, "stdio"]}



@pytest.fixture
def http_server():
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


async def test_stdio_tools_load_call_and_fail_as_data():
    client = MultiServerMCPClient({"math": STDIO})
    tools = {tool.name: tool for tool in await client.get_tools(server_name="math")}
    assert set(tools) == {"add", "fail"}
    assert tools["add"].get_tool_schema()["required"] == ["a", "b"]
    assert (await tools["add"](a=2, b=40)).get_json() == {"result": 42}
    assert "error executing tool fail" in (await tools["fail"](reason="boom")).get_json()["error"].lower()
    assert (await tools["add"](a="x", b=1)).get_json()["error"].startswith("invalid arguments for add")


async def test_streamable_http_tools_are_namespaced_by_server(http_server):
    client = MultiServerMCPClient({"calc": {"transport": "streamable_http", "url": http_server,
                                            "headers": {"Authorization": "Bearer secret"}}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    assert set(tools) == {"calc_add", "calc_fail"}
    assert (await tools["calc_add"](a=1, b=2)).get_json() == {"result": 3}
    saved = serialize_object(tools["calc_add"])
    assert "secret" not in str(saved)  # headers may hold secrets: never saved
    assert deserialize_object(saved).mcp_name == "add"


async def test_an_agent_uses_mcp_tools():
    tools = await MultiServerMCPClient({"math": STDIO}).get_tools(server_name="math")
    lm = ScriptedLanguageModel(responses=[
        {"tool_calls": [{"tool_name": "add", "arguments": {"a": 152648, "b": 485}}]}, {"final_answer": "153133"}])
    agent = pg.FunctionCallingAgent(tools=tools, language_model=lm)
    result = await agent(pg.ChatMessages(messages=[pg.ChatMessage(role="user", content="152648 + 485?")]))
    messages = result.get_json()["messages"]
    assert messages[2]["content"] == {"result": 153133} and messages[-1]["content"] == "153133"


def test_a_bad_connection_is_named():
    with pytest.raises(ValueError, match="MCP server 'x': transport must be one of stdio, streamable_http"):
        MultiServerMCPClient({"x": {"transport": "carrier-pigeon"}})
    with pytest.raises(ValueError, match="a streamable_http connection needs 'url'"):
        MultiServerMCPClient({"x": {"transport": "streamable_http"}})
