"""``MultiServerMCPClient``: the tools of Model Context Protocol servers as promptgym ``Tool``s.

    client = MultiServerMCPClient({
        "math": {"transport": "stdio", "command": "python", "args": ["math_server.py"]},
        "search": {"transport": "streamable_http", "url": "http://127.0.0.1:8183/mcp/"},
    })
    tools = await client.get_tools()                      # math_add, search_lookup, ... (server-prefixed)
    tools = await client.get_tools(server_name="math")    # add, ... (the server's own names)

Each tool call opens its own session with the server (stdio: a fresh
process; HTTP: a request stream), so a tool is plain data: it survives
``save``/``load`` without a live connection (headers and environment, which
may hold secrets, are not saved). The ``mcp`` package is optional:
``pip install 'promptgym[mcp]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from typing import Any, AsyncIterator

from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import register_builtin
from promptgym.modules.module import Module
from promptgym.modules.tool import (
    DEFAULT_MAX_RESULT_CHARS,
    DEFAULT_TOOL_TIMEOUT_S,
    Tool,
    check_max_result_chars,
    check_timeout,
    check_tool_name,
)

TRANSPORTS = ("stdio", "streamable_http")
DEFAULT_LIST_TIMEOUT_S = 60.0
_UNSAVED_KEYS = ("headers", "env")  # may carry secrets


def _import_mcp() -> Any:
    try:
        import mcp
    except ImportError as error:
        raise ImportError("MCP tools need the `mcp` package: pip install 'promptgym[mcp]'") from error
    return mcp


class MCPServerError(RuntimeError):
    """An MCP server that did not answer: it exited, closed the connection, never spoke MCP, or ran past the timeout."""


def describe_server(connection: dict[str, Any]) -> str:
    """What a connection reaches, for messages: its URL, or its command line."""
    return connection.get("url") or " ".join([str(connection.get("command")), *map(str, connection.get("args") or [])])


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The exceptions inside anyio's task-group wrappers (what actually went wrong)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


def server_failure(where: str, error: BaseException) -> MCPServerError:
    """``error`` from the mcp client as one sentence naming the server, without the task-group wrapping."""
    leaves = leaf_errors(error)
    words = "; ".join(f"{type(leaf).__name__}: {leaf}".rstrip(": ") for leaf in leaves)
    if any("closed" in str(leaf).lower() or type(leaf).__name__ in ("ClosedResourceError", "BrokenResourceError",
                                                                     "EndOfStream") for leaf in leaves):
        return MCPServerError(f"{where} closed the connection (it exited or crashed; {words})")
    return MCPServerError(f"{where} failed: {words}")


def check_connection(server: str, connection: Any) -> dict[str, Any]:
    """A connection config, or a ValueError naming the server and the key that is wrong."""
    if not isinstance(connection, dict):
        raise ValueError(f"MCP server {server!r}: the connection must be a dict, got {type(connection).__name__}")
    transport = connection.get("transport")
    transport = "streamable_http" if transport == "streamable-http" else transport
    if transport not in TRANSPORTS:
        raise ValueError(f"MCP server {server!r}: transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    needed = "command" if transport == "stdio" else "url"
    if not connection.get(needed):
        raise ValueError(f"MCP server {server!r}: a {transport} connection needs {needed!r}")
    return {**connection, "transport": transport}


class OneLineParseErrors(logging.Filter):
    """The mcp client logs each line a server writes that is not JSON-RPC with a full traceback, which reads
    like a crash of the caller's program; this keeps it to one line naming what the server sent."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            first = str(error).splitlines()
            detail = next((line.strip() for line in first if "input_value=" in line), first[0] if first else "")
            record.msg = f"{record.getMessage()} (not JSON-RPC; the server must write only MCP messages on its " \
                         f"stdout): {detail[:300]}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


_PARSE_FILTER = OneLineParseErrors()


@contextlib.asynccontextmanager
async def open_session(connection: dict[str, Any]) -> AsyncIterator[Any]:
    """An initialized ``mcp.ClientSession`` on ``connection`` (closed, and a stdio server stopped, on exit)."""
    mcp = _import_mcp()
    stdio_log = logging.getLogger("mcp.client.stdio")
    if _PARSE_FILTER not in stdio_log.filters:
        stdio_log.addFilter(_PARSE_FILTER)
    async with contextlib.AsyncExitStack() as stack:
        if connection["transport"] == "stdio":
            from mcp.client.stdio import stdio_client

            parameters = mcp.StdioServerParameters(command=connection["command"], args=list(connection.get("args") or []),
                                                   env=connection.get("env"), cwd=connection.get("cwd"))
            read, write = await stack.enter_async_context(stdio_client(parameters))
        else:
            import httpx2  # the MCP SDK's own HTTP client (its transport takes no other), installed with it
            from mcp.client.streamable_http import streamable_http_client

            client = await stack.enter_async_context(httpx2.AsyncClient(
                headers=connection.get("headers"), timeout=float(connection.get("timeout", 30.0)),
                follow_redirects=True))
            streams = await stack.enter_async_context(streamable_http_client(connection["url"], http_client=client))
            read, write = streams[0], streams[1]
        session = await stack.enter_async_context(mcp.ClientSession(read, write))
        await session.initialize()
        yield session


def result_json(result: Any) -> dict[str, Any]:
    """An MCP ``CallToolResult`` as the dict a tool returns (``{"error"}`` when the server says it failed)."""
    texts = [getattr(item, "text", None) for item in getattr(result, "content", None) or []]
    texts = [text for text in texts if text is not None]
    others = [item for item in getattr(result, "content", None) or [] if getattr(item, "text", None) is None]
    text = "\n".join(texts)
    if getattr(result, "is_error", False) or getattr(result, "isError", False):
        return {"error": text or "the MCP tool reported an error"}
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if isinstance(structured, dict):
        return structured
    value: dict[str, Any] = {"result": _maybe_json(text)} if texts else {}
    if others:
        value["attachments"] = [getattr(item, "type", type(item).__name__) for item in others]
    return value or {"result": None}


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def model_facing_name(name: str) -> str:
    """An MCP tool's name as a model may see it: MCP allows dots and more, OpenAI-style servers refuse them.

    Characters outside ``[A-Za-z0-9_-]`` become ``_`` and the name is cut at 64; the call
    still goes to the server under its own name.

    >>> model_facing_name("files.read v2")
    'files_read_v2'
    """
    return (re.sub(r"[^A-Za-z0-9_-]", "_", str(name)) or "tool")[:64]


@register_builtin
class MCPTool(Tool):
    """A tool served by an MCP server: its schema is the server's, each call a request to it."""

    def __init__(self, *, connection: dict[str, Any], mcp_name: str, input_schema: dict[str, Any],
                 name: str | None = None, description: str | None = None,
                 timeout: float | None = DEFAULT_TOOL_TIMEOUT_S, trainable: bool = False,
                 max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS) -> None:
        name = check_tool_name(name or model_facing_name(mcp_name), f"MCPTool({mcp_name!r})")
        Module.__init__(self, name=name, description=description or "", trainable=trainable)
        self.connection = check_connection(name or mcp_name, connection)
        self.mcp_name = mcp_name
        self.input_schema = input_schema or {"type": "object", "properties": {}}
        self._properties = dict(self.input_schema.get("properties") or {})
        self._required = list(self.input_schema.get("required") or [])
        self.timeout = check_timeout(timeout, name)
        self.max_result_chars = check_max_result_chars(max_result_chars, name)
        self.last_call_failed = False
        self.calls = 0
        self.failed_calls = 0
        self._is_async = True
        self._func = self._call_server

    def get_tool_schema(self) -> dict[str, Any]:
        return {**self.input_schema, "type": "object", "properties": dict(self._properties),
                "required": list(self._required), "title": self.name.title().replace("_", " ")}

    get_input_schema = get_tool_schema

    async def _call_server(self, **arguments: Any) -> dict[str, Any]:
        try:
            async with open_session(self.connection) as session:
                return result_json(await session.call_tool(self.mcp_name, arguments))
        except Exception as error:  # noqa: BLE001 - the mcp client's task groups wrap what went wrong
            raise server_failure(f"the MCP server behind {self.mcp_name!r} ({describe_server(self.connection)})",
                                 error) from None

    async def invoke(self, arguments: dict[str, Any], training: bool = False) -> JsonDataModel:
        result = await super().invoke(arguments, training=training)
        if "error" in result.get_json() and len(result.get_json()) == 1:
            self.last_call_failed = True
        return result

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "mcp_name": self.mcp_name,
                "input_schema": self.input_schema, "timeout": self.timeout, "trainable": self.trainable,
                "max_result_chars": self.max_result_chars,
                "connection": {key: value for key, value in self.connection.items() if key not in _UNSAVED_KEYS}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "MCPTool":
        return cls(**config)

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.connection.get('url') or self.connection.get('command')!r})"


class MultiServerMCPClient:
    """Connections to MCP servers, by name (synalinks' and langchain-mcp-adapters' form).

    Args:
        connections: ``{name: {"transport": "stdio", "command", "args", "env", "cwd"}}`` or
            ``{name: {"transport": "streamable_http", "url", "headers", "timeout"}}``.
        timeout: seconds one tool call may take.
        list_timeout: seconds listing a server's tools may take, its start included (a stdio server that never
            speaks MCP would otherwise be waited for forever).
    """

    def __init__(self, connections: dict[str, dict[str, Any]] | None = None,
                 timeout: float | None = DEFAULT_TOOL_TIMEOUT_S, list_timeout: float = DEFAULT_LIST_TIMEOUT_S) -> None:
        self.connections = {name: check_connection(name, connection) for name, connection in (connections or {}).items()}
        self.timeout = timeout
        self.list_timeout = list_timeout

    @contextlib.asynccontextmanager
    async def session(self, server_name: str) -> AsyncIterator[Any]:
        """An initialized MCP ``ClientSession`` with one server."""
        async with open_session(self._connection(server_name)) as session:
            yield session

    def _connection(self, server_name: str) -> dict[str, Any]:
        if server_name not in self.connections:
            raise ValueError(f"no MCP server named {server_name!r}; the servers are: {', '.join(self.connections) or 'none'}")
        return self.connections[server_name]

    async def get_tools(self, *, server_name: str | None = None) -> list[Tool]:
        """The tools of one server (its own names), or of all (named ``<server>_<tool>``)."""
        if server_name is not None:
            return await self._load(server_name, namespace=False)
        tools: list[Tool] = []
        for name in self.connections:
            tools.extend(await self._load(name, namespace=True))
        return tools

    async def _list(self, server_name: str, connection: dict[str, Any]) -> Any:
        """The server's tool list; an MCPServerError naming it when it fails or is silent past ``timeout``."""
        where = f"MCP server {server_name!r} ({describe_server(connection)})"

        async def listed() -> Any:
            async with open_session(connection) as session:
                return await session.list_tools()

        try:
            return await asyncio.wait_for(listed(), self.list_timeout)
        except asyncio.TimeoutError:  # a server that never speaks MCP would otherwise be waited for forever
            raise MCPServerError(f"{where}: did not answer within {self.list_timeout:g} s (does it speak MCP on its "
                                 "stdout, or listen at that URL?)") from None
        except Exception as error:  # noqa: BLE001 - the mcp client's task groups wrap what went wrong
            raise server_failure(where, error) from None

    async def _load(self, server_name: str, namespace: bool) -> list[Tool]:
        connection = self._connection(server_name)
        listed = await self._list(server_name, connection)
        tools: list[Tool] = []
        for tool in listed.tools:
            schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
            tools.append(MCPTool(connection=connection, mcp_name=tool.name, input_schema=schema,
                                 name=model_facing_name(f"{server_name}_{tool.name}" if namespace else tool.name),
                                 description=tool.description or "", timeout=self.timeout))
        return tools

    async def __aenter__(self) -> "MultiServerMCPClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None
