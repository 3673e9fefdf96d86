"""MCP servers that misbehave (issue 44's fault pass): one that never speaks MCP, dies mid-call or exits at start."""

from __future__ import annotations

import sys
import textwrap

import pytest

pytest.importorskip("mcp")

from promptgym.modules.mcp_tools import MCPServerError, MCPTool, MultiServerMCPClient  # noqa: E402

DIES = textwrap.dedent('''
    import os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("dies")

    @server.tool()
    def die(x: int) -> int:
        """Exit mid-call."""
        os._exit(1)

    server.run("stdio")
''')


async def test_a_server_that_never_speaks_mcp_fails_at_the_timeout_naming_the_server(caplog):
    silent = {"transport": "stdio", "command": sys.executable,
              "args": ["-c", "import time; print('not MCP', flush=True); time.sleep(3600)"]}
    client = MultiServerMCPClient({"mute": silent}, list_timeout=2)
    with pytest.raises(MCPServerError) as raised:
        await client.get_tools(server_name="mute")
    message = str(raised.value)
    assert "MCP server 'mute'" in message and "did not answer within 2 s" in message and sys.executable in message
    logged = [record for record in caplog.records if record.name == "mcp.client.stdio"]
    assert logged and "input_value='not MCP'" in logged[0].getMessage() and logged[0].exc_info is None


async def test_a_server_that_exits_at_start_is_named_without_an_exception_group():
    client = MultiServerMCPClient({"gone": {"transport": "stdio", "command": sys.executable,
                                            "args": ["-c", "import sys; sys.exit(1)"]}}, timeout=10)
    with pytest.raises(MCPServerError) as raised:
        await client.get_tools(server_name="gone")
    message = str(raised.value)
    assert "MCP server 'gone'" in message and "closed the connection" in message
    assert "TaskGroup" not in message


async def test_a_server_that_dies_mid_call_is_a_tool_error_naming_it(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(DIES)
    tool = MCPTool(connection={"transport": "stdio", "command": sys.executable, "args": [str(script)]},
                   mcp_name="die", input_schema={"type": "object", "properties": {"x": {"type": "integer"}}}, timeout=20)
    error = (await tool(x=1)).get_json()["error"]
    assert error.startswith("die failed: MCPServerError: the MCP server behind 'die'") and "closed the connection" in error
    assert "TaskGroup" not in error


def test_an_mcp_tool_timeout_that_is_not_a_positive_number_is_refused():
    from promptgym.modules.tool import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match="'add': timeout must be a number of seconds > 0 or None, got -1"):
        MCPTool(connection={"transport": "stdio", "command": "python"}, mcp_name="add", input_schema={}, timeout=-1)
