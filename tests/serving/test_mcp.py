"""MCP mode in-process: programs listed as tools with their input schema, called, errors as tool errors."""

from __future__ import annotations

from mcp.client.client import Client

from promptgym.serving import ServedProgram
from promptgym.serving.mcp_server import mcp_server
from promptgym.serving.metrics import sample_value
from promptgym.serving.context import ServerContext


async def test_tools_are_the_programs_and_calls_run_them(qa) -> None:
    state = ServerContext(programs={"qa": ServedProgram.of(qa)})
    async with Client(mcp_server(state)) as client:
        tools = (await client.list_tools()).tools
        result = await client.call_tool("qa", {"question": "mcp"})
        failed = await client.call_tool("qa", {"question": "fail"})
        unknown = await client.call_tool("nope", {})
    assert [(tool.name, tool.input_schema["required"]) for tool in tools] == [("qa", ["question"])]
    assert tools[0].output_schema["properties"]["answer"]["type"] == "string"
    assert result.structured_content == {"answer": "MCP"} and result.content[0].text == '{"answer": "MCP"}'
    assert failed.is_error and "scripted failure" in failed.content[0].text
    assert unknown.is_error and "no tool named 'nope'" in unknown.content[0].text
    assert sample_value(state.metrics, "promptgym_requests_total", program="qa", route="mcp", status=200) == 1
    assert sample_value(state.metrics, "promptgym_failures_total", program="qa", reason="model_error") == 1
