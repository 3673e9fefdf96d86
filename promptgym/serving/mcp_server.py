"""MCP mode: every served program is a tool, its input schema the program's input DataModel.

    server = mcp_server(state)                 # an mcp.server.lowlevel.Server
    await run_stdio(server)                    # `promptgym serve --mcp stdio`
    app = server.streamable_http_app(...)      # `promptgym serve --mcp http` (under /mcp)

A tool call answers the output JSON as text and as structured content; a bad input or a
failing model is a tool error (``is_error``) whose text names the field or the failure, so
the calling agent can correct itself.
"""

from __future__ import annotations

import json
import logging
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from promptgym.lm.errors import LMError
from promptgym.serving.admission import Busy
from promptgym.serving.programs import InputError, NoOutputError, ServedProgram
from promptgym.serving.state import ServerState

logger = logging.getLogger("promptgym.serve")


def tool_of(served: ServedProgram) -> types.Tool:
    description = served.description or f"Run the trained promptgym program {served.name!r}."
    return types.Tool(name=served.name, description=description, input_schema=served.input_schema,
                      output_schema=served.output_schema if served.output_schema.get("type") == "object" else None)


def mcp_server(state: ServerState) -> Server[Any]:
    """An MCP server listing ``state``'s programs as tools and running them on call."""

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_of(served) for served in state.programs.values()])

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        started = time.perf_counter()
        served = state.programs.get(params.name)
        if served is None:
            return _tool_error(state, "", f"no tool named {params.name!r}; tools: {', '.join(sorted(state.programs))}",
                               "not_found", started)
        try:
            inputs = served.validate(params.arguments or {}, "arguments")
            async with state.admission.slot():
                output, usage = await served.run(inputs)
        except InputError as error:
            return _tool_error(state, served.name, str(error), "invalid_input", started)
        except Busy as error:
            return _tool_error(state, served.name, str(error), "busy", started)
        except (LMError, NoOutputError) as error:
            return _tool_error(state, served.name, f"the language model failed: {error}", "model_error", started)
        except Exception as error:  # noqa: BLE001 - a failing call is a tool error, never a crash or a traceback
            return _tool_error(state, served.name, f"{type(error).__name__}: {error}", "internal", started)
        seconds = time.perf_counter() - started
        state.metrics.observe(served.name, "mcp", 200, seconds, usage)
        logger.info("mcp tool=%s ok %.1fms lm_calls=%d", served.name, seconds * 1000, usage.calls)
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(output, ensure_ascii=False))],
                                    structured_content=output)

    return Server("promptgym", version=_version(), instructions="Each tool is a trained promptgym program: call it "
                  "with its input fields; it answers with its output fields as JSON.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _tool_error(state: ServerState, program: str, message: str, reason: str, started: float) -> types.CallToolResult:
    state.metrics.observe(program, "mcp", 400 if reason in ("invalid_input", "not_found") else 500,
                          time.perf_counter() - started)
    state.metrics.failed(program, reason)
    logger.info("mcp tool=%s failed (%s) %.1fms", program or "?", reason, (time.perf_counter() - started) * 1000)
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


async def run_stdio(server: Server[Any]) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes them."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _version() -> str:
    try:
        return version("promptgym")
    except PackageNotFoundError:
        return "0"
