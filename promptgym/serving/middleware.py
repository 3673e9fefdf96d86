"""The outermost layer of the server: request ids, the API key, the body limit, the log line, the metrics.

A plain ASGI middleware (no per-request task or body copy, unlike Starlette's
``BaseHTTPMiddleware``), so it adds microseconds, not milliseconds. It logs one line per
request, with the body only when ``log_inputs`` is set, and never a header (the key) or a
traceback.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any, Awaitable, Callable

from promptgym.serving.auth import key_matches, presented_key
from promptgym.serving.errors import BodyTooLarge, error_body
from promptgym.serving.recording import TRACE_HEADER
from promptgym.serving.context import ServerContext

logger = logging.getLogger("promptgym.serve")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz"})
PREDICT_PATH = re.compile(r"^/v1/programs/([^/]+)/predict$")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
FAILURE_BY_STATUS = {400: "invalid_input", 401: "unauthorized", 404: "not_found", 405: "not_found",
                     413: "too_large", 422: "invalid_input", 429: "busy", 500: "internal", 502: "model_error"}
LOGGED_INPUT_CHARS = 2000
TRUNCATED_HEADER = "x-promptgym-truncated"
"""On an answer for which a model stopped at ``max_tokens``: how many of its calls did (raise max_tokens)."""


class ServingMiddleware:
    """Wraps the FastAPI app (``.app``); ``.state`` is the :class:`ServerContext`."""

    def __init__(self, app: Any, state: ServerContext) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        given_id = headers.get("x-request-id", "")
        request_id = given_id if REQUEST_ID.match(given_id) else uuid.uuid4().hex[:16]
        request_state = scope.setdefault("state", {})
        request_state["request_id"] = request_id
        response: dict[str, Any] = {"status": 500, "started": False}
        body = bytearray() if self.state.settings.log_inputs else None

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                response["status"], response["started"] = message["status"], True
                extra = [(b"x-request-id", request_id.encode())]
                if request_state.get("trace_id"):
                    extra.append((TRACE_HEADER.encode(), request_state["trace_id"].encode()))
                truncated = getattr(request_state.get("usage"), "truncated_calls", 0)
                if truncated:  # an answer stopped at max_tokens may be cut short: say so, it is served as written
                    extra.append((TRUNCATED_HEADER.encode(), str(truncated).encode()))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message, code = refusal
            await self._send_error(send_with_id, status, message, code)
        else:
            limit, received = self.state.settings.max_body_bytes, 0

            async def counted_receive() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    chunk = message.get("body", b"")
                    received += len(chunk)
                    if received > limit:
                        raise BodyTooLarge(limit)
                    if body is not None:
                        body.extend(chunk)
                return message

            try:
                await self.app(scope, counted_receive, send_with_id)
            except Exception as error:  # noqa: BLE001 - already answered by Starlette, or answered here; no traceback
                request_state.setdefault("error", f"{type(error).__name__}: {error}")
                request_state.setdefault("failure", "internal")
                if not response["started"]:
                    await self._send_error(send_with_id, 500, "internal error; see the server log", "internal")
        self._record(scope, request_state, response["status"], time.perf_counter() - started, body)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, message, code) for a request refused before it is read: no key, a body too large."""
        settings = self.state.settings
        if settings.api_key and scope.get("path") not in OPEN_PATHS and \
                not key_matches(settings.api_key, presented_key(headers)):
            return 401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "invalid_api_key"
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                return 400, f"invalid Content-Length header {length[:32]!r}", "invalid_request"
            if int(length) > settings.max_body_bytes:
                return 413, (f"the request body ({int(length)} bytes) is larger than the limit of "
                             f"{settings.max_body_bytes} bytes"), "request_too_large"
        return None

    def _route_of(self, path: str) -> tuple[str, str | None]:
        if path == "/v1/chat/completions":
            return "", "chat"
        match = PREDICT_PATH.match(path)
        if match:
            return (match.group(1) if match.group(1) in self.state.programs else ""), "predict"
        return "", None

    @staticmethod
    async def _send_error(send: Send, status: int, message: str, code: str) -> None:
        payload = json.dumps(error_body(status, message, code=code)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})

    def _record(self, scope: Scope, request_state: dict[str, Any], status: int, seconds: float,
                body: bytearray | None) -> None:
        program, route = request_state.get("program", ""), request_state.get("route")
        if route is None:  # refused before a route ran (bad body, no key): named from the path
            program, route = self._route_of(scope.get("path", ""))
        usage = request_state.get("usage")
        if route is not None:
            self.state.metrics.observe(program, route, status, seconds, usage)
        if status >= 400:
            self.state.metrics.failed(program, request_state.get("failure") or FAILURE_BY_STATUS.get(status, "other"))
        parts = [f"id={request_state['request_id']}", scope.get("method", ""), scope.get("path", ""), str(status),
                 f"{seconds * 1000:.1f}ms"]
        if program:
            parts.append(f"program={program}")
        if usage is not None and usage.calls:
            parts.append(f"lm_calls={usage.calls} tokens={usage.prompt_tokens}+{usage.completion_tokens}")
        if request_state.get("error"):
            parts.append(f"error={json.dumps(request_state['error'][:300])}")
        if body is not None and body:
            parts.append(f"input={json.dumps(body[:LOGGED_INPUT_CHARS].decode('utf-8', 'replace'))}")
        logger.log(logging.WARNING if status >= 500 else logging.INFO, " ".join(parts))
