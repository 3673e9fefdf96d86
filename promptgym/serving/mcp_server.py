"""MCP mode: every served program is a tool, its input schema the program's input DataModel.

    server = mcp_server(state)                 # an mcp.server.lowlevel.Server
    await run_stdio(server)                    # `promptgym serve --mcp stdio`
    app = server.streamable_http_app(...)      # `promptgym serve --mcp http` (under /mcp)

A tool call answers the output JSON as text and as structured content; a bad input or a
failing model is a tool error (``is_error``) whose text names the field or the failure, so
the calling agent can correct itself.
"""

from __future__ import annotations

import asyncio
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
from promptgym.traces.feedback import FeedbackError
from promptgym.serving.context import ServerContext

logger = logging.getLogger("promptgym.serve")

TRACE_META = "promptgym/trace_id"
"""Where a recorded call's trace id is in the tool result's ``_meta``."""
FEEDBACK_TOOL = types.Tool(
    name="promptgym_feedback",
    description="Rate a call of another tool, correct its output, or comment on it (its trace id is in that "
                f"result's _meta under {TRACE_META!r}).",
    input_schema={"type": "object", "required": ["trace_id"], "additionalProperties": False, "properties": {
        "trace_id": {"type": "string"}, "rating": {"type": "number"},
        "correction": {"type": "object", "description": "the output the call should have given"},
        "comment": {"type": "string"}}})


def tool_of(served: ServedProgram) -> types.Tool:
    description = served.description or f"Run the trained promptgym program {served.name!r}."
    return types.Tool(name=served.name, description=description, input_schema=served.input_schema,
                      output_schema=served.output_schema if served.output_schema.get("type") == "object" else None)


def mcp_server(state: ServerContext) -> Server[Any]:
    """An MCP server listing ``state``'s programs as tools and running them on call."""

    async def list_tools(context: Any, params: Any) -> types.ListToolsResult:
        tools = [tool_of(served) for served in state.programs.values()]
        return types.ListToolsResult(tools=tools + ([FEEDBACK_TOOL] if state.recorder is not None else []))

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        started = time.perf_counter()
        if params.name == FEEDBACK_TOOL.name and state.recorder is not None:
            return await feedback(state, params.arguments or {}, started)
        served = state.programs.get(params.name)
        if served is None:
            return _tool_error(state, "", f"no tool named {params.name!r}; tools: {', '.join(sorted(state.programs))}",
                               "not_found", started)
        try:
            inputs = served.validate(params.arguments or {}, "arguments")
            async with state.admission.slot():
                call = await served.run(inputs)
        except InputError as error:
            return _tool_error(state, served.name, str(error), "invalid_input", started)
        except Busy as error:
            return _tool_error(state, served.name, str(error), "busy", started)
        except (LMError, NoOutputError) as error:
            return _tool_error(state, served.name, f"the language model failed: {error}", "model_error", started)
        except Exception as error:  # noqa: BLE001 - a failing call is a tool error, never a crash or a traceback
            return _tool_error(state, served.name, f"{type(error).__name__}: {error}", "internal", started)
        seconds = time.perf_counter() - started
        state.metrics.observe(served.name, "mcp", 200, seconds, call.usage)
        logger.info("mcp tool=%s ok %.1fms lm_calls=%d", served.name, seconds * 1000, call.usage.calls)
        meta = None
        if state.recorder is not None:
            meta = {TRACE_META: state.recorder.record(served.name, inputs, call)}
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(call.output,
                                                                                            ensure_ascii=False))],
                                    structured_content=call.output, meta=meta)

    return Server("promptgym", version=_version(), instructions="Each tool is a trained promptgym program: call it "
                  "with its input fields; it answers with its output fields as JSON.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def feedback(state: ServerContext, arguments: dict[str, Any], started: float) -> types.CallToolResult:
    """The feedback tool: the stored feedback as JSON, or a tool error naming the bad field or unknown trace."""
    try:
        given = await asyncio.to_thread(state.recorder.feedback, arguments)
    except FeedbackError as error:
        return _tool_error(state, "", str(error), "not_found" if error.status == 404 else "invalid_input", started)
    stored = {"trace_id": given.trace_id, "rating": given.rating, "correction": given.correction,
              "comment": given.comment}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(stored, ensure_ascii=False))],
                                structured_content=stored)


def _tool_error(state: ServerContext, program: str, message: str, reason: str, started: float) -> types.CallToolResult:
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
