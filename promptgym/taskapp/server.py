"""Turn a Python rollout function into a task app (FastAPI).

    async def rollout(request: RolloutRequest) -> RolloutResponse: ...
    app = create_task_app(TaskInfo(name="arithmetic", splits={"train": [0, 1, 2]}), rollout,
                          api_key_env="TASK_APP_API_KEY")
    # serve(app, port=8001)

The rollout function may be sync or async, and may return a RolloutResponse
or a dict with ``reward`` (and optionally ``feedback``, ``trajectory``).
Requests for a seed or split the app doesn't list are refused (400), bodies
over ``max_body_bytes`` too (413), and a key that doesn't match is a 401.
"""

import inspect
import logging
import os
import secrets
from typing import Any, Callable

import pydantic

from promptgym.taskapp.protocol import API_KEY_HEADER, Health, RolloutRequest, RolloutResponse, TaskInfo

logger = logging.getLogger("promptgym.taskapp")

RolloutFunction = Callable[[RolloutRequest], Any]
MAX_BODY_BYTES = 10_000_000


def key_matches(given: str, expected: str) -> bool:
    """Constant-time comparison that also takes header values that aren't ASCII (they never match)."""
    return secrets.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape"))


def seed_problem(info: TaskInfo, request: RolloutRequest) -> str | None:
    """Why the app doesn't serve this (split, seed), or None; an app listing no splits serves any."""
    if not info.splits:
        return None
    if request.split not in info.splits:
        return f"unknown split {request.split!r}; this app has {', '.join(sorted(info.splits))}"
    seeds = info.splits[request.split]
    if request.seed not in seeds:
        shown = ", ".join(str(seed) for seed in seeds[:10]) + (", ..." if len(seeds) > 10 else "")
        return f"seed {request.seed} is not in split {request.split!r} (its seeds: {shown})"
    return None


def as_response(result: Any, seed: int) -> RolloutResponse:
    """The rollout function's result as a RolloutResponse, or a ValueError saying what was wrong with it."""
    if isinstance(result, RolloutResponse):
        return result
    if not isinstance(result, dict):
        raise ValueError(f"the rollout function returned {type(result).__name__}, expected a RolloutResponse "
                         "or a dict with 'reward'")
    try:
        return RolloutResponse(**{"seed": seed, **result})
    except pydantic.ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in error.errors()[:5])
        raise ValueError(f"the rollout function returned a dict that is not a RolloutResponse ({problems})") from None


class BodySizeLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets a 413, read no further."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        received = 0

        async def counted_receive() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counted_receive, send)
        except _BodyTooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = f'{{"detail": "request body over {self.max_bytes} bytes"}}'.encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _BodyTooLarge(Exception):
    pass


def create_task_app(info: TaskInfo, rollout: RolloutFunction, api_key: str | None = None,
                    api_key_env: str | None = "TASK_APP_API_KEY", check_seeds: bool = True,
                    max_body_bytes: int = MAX_BODY_BYTES) -> Any:
    """A FastAPI app serving ``/health``, ``/task_info`` and ``/rollout``.

    The key is ``api_key`` or ``$api_key_env``; with neither, the app is open to
    anyone who can reach it (a warning says so). ``check_seeds=False`` serves
    seeds outside ``info.splits`` (for apps that generate tasks from any seed).
    """
    from fastapi import Depends, FastAPI, HTTPException, Request

    expected = api_key or (os.environ.get(api_key_env) if api_key_env else None)
    if not expected:
        logger.warning("task app %r has no API key: anyone who can reach it can run rollouts%s", info.name,
                       f" (set ${api_key_env})" if api_key_env else "")
    app = FastAPI(title=f"promptgym task app: {info.name}")
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)

    def check_key(request: Request) -> None:
        if expected and not key_matches(request.headers.get(API_KEY_HEADER, ""), expected):
            raise HTTPException(status_code=401, detail=f"missing or wrong {API_KEY_HEADER} header")

    @app.get("/health")
    def health() -> Health:
        return Health()

    @app.get("/task_info", dependencies=[Depends(check_key)])
    def task_info() -> TaskInfo:
        return info

    @app.post("/rollout", dependencies=[Depends(check_key)])
    async def do_rollout(request: RolloutRequest) -> RolloutResponse:
        problem = seed_problem(info, request) if check_seeds else None
        if problem:
            raise HTTPException(status_code=400, detail=problem)
        try:
            result = rollout(request)
            if inspect.isawaitable(result):
                result = await result
            return as_response(result, request.seed)
        except Exception as error:  # noqa: BLE001 - the client scores it 0 and logs it
            logger.exception("rollout seed=%d failed", request.seed)
            raise HTTPException(status_code=500, detail=f"rollout failed: {type(error).__name__}: {error}") from None

    return app


def serve(app: Any, host: str = "127.0.0.1", port: int = 8001) -> None:
    """Run ``app`` with uvicorn (blocking)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning")
