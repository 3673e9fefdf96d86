"""Error answers in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, for every route.

The message names the field (``param``) and what was expected; no traceback ever reaches a
response or the log.
"""

from __future__ import annotations

import sys
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               405: "invalid_request_error", 409: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
               429: "rate_limit_error", 500: "server_error", 502: "model_error", 503: "server_error"}


class BodyTooLarge(Exception):
    """A request body longer than the server's limit (``--max-body-bytes``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than the limit of {limit} bytes")


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "invalid_request_error"), "param": param,
                      "code": code}}


def error_response(status: int, message: str, param: str | None = None, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param, code), status_code=status, headers=headers)


def field_path(location: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "items", 0, "name")`` -> ``items[0].name`` (the body itself is implied)."""
    parts = list(location)
    if parts and parts[0] == "body":
        parts = parts[1:]
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def describe_validation(errors: list[dict[str, Any]]) -> tuple[int, str, str | None]:
    """(status, message, param) for FastAPI's validation errors of a request body."""
    first = errors[0]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "invalid JSON")
        return 400, f"the request body is not valid JSON ({reason})", None
    path = field_path(first.get("loc", ()))
    if not path and first.get("type") == "missing":
        return 400, "the request body is empty or null: expected a JSON object", None
    if not path and first.get("type") in ("model_attributes_type", "dict_type"):
        if isinstance(first.get("input"), bytes):  # FastAPI passes a body not sent as JSON on as bytes
            return 400, "the request body must be JSON (send it with Content-Type: application/json)", None
        return 422, f"the request body must be a JSON object, got {_json_type(first.get('input'))}", None
    extra = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return 422, f"{path or 'body'}: {first.get('msg', 'invalid value')}{extra}", path or None


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)


async def on_validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    status, message, param = describe_validation(list(error.errors()))
    request.state.failure = "invalid_input"
    return error_response(status, message, param, code="invalid_json" if status == 400 else "invalid_value")


async def on_http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    if isinstance(error.__cause__, BodyTooLarge):  # FastAPI wraps what reading the body raised
        return await on_body_too_large(request, error.__cause__)
    message = error.detail if isinstance(error.detail, str) else "request failed"
    if error.status_code == 400 and error.__cause__ is not None:  # FastAPI could not decode the body
        request.state.failure = "invalid_input"
        cause = error.__cause__
        reason = "nested too deeply" if isinstance(cause, RecursionError) else \
            "not UTF-8 text" if isinstance(cause, UnicodeDecodeError) else \
            f"a number of more than {sys.get_int_max_str_digits()} digits" if "integer string conversion" in str(cause) \
            else type(cause).__name__
        return error_response(400, f"the request body is not valid JSON ({reason})", code="invalid_json")
    if error.status_code == 404 and message == "Not Found":
        message = f"no route {request.method} {request.url.path}; see GET /v1/models and /docs"
    elif error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(error.status_code, message, headers=getattr(error, "headers", None))


async def on_body_too_large(request: Request, error: BodyTooLarge) -> JSONResponse:
    request.state.failure = "too_large"
    return error_response(413, str(error), code="request_too_large")
