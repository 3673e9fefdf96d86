"""Turn a Python rollout function into a task app (FastAPI).

    async def rollout(request: RolloutRequest) -> RolloutResponse: ...
    app = create_task_app(TaskInfo(name="arithmetic", splits={"train": [0, 1, 2]}), rollout,
                          api_key_env="TASK_APP_API_KEY")
    # serve(app, port=8001)

The rollout function may be sync or async, and may return a RolloutResponse
or a dict with ``reward`` (and optionally ``feedback``, ``trajectory``).
"""

import inspect
import logging
import os
import secrets
from typing import Any, Callable

from promptgym.taskapp.protocol import API_KEY_HEADER, Health, RolloutRequest, RolloutResponse, TaskInfo

logger = logging.getLogger("promptgym.taskapp")

RolloutFunction = Callable[[RolloutRequest], Any]


def create_task_app(info: TaskInfo, rollout: RolloutFunction, api_key: str | None = None,
                    api_key_env: str | None = "TASK_APP_API_KEY") -> Any:
    """A FastAPI app serving ``/health``, ``/task_info`` and ``/rollout``.

    The key is ``api_key`` or ``$api_key_env``; with neither, the app is open.
    """
    from fastapi import Depends, FastAPI, HTTPException, Request

    expected = api_key or (os.environ.get(api_key_env) if api_key_env else None)
    app = FastAPI(title=f"promptgym task app: {info.name}")

    def check_key(request: Request) -> None:
        if expected and not secrets.compare_digest(request.headers.get(API_KEY_HEADER, ""), expected):
            raise HTTPException(status_code=401, detail=f"missing or wrong {API_KEY_HEADER} header")

    @app.get("/health")
    def health() -> Health:
        return Health()

    @app.get("/task_info", dependencies=[Depends(check_key)])
    def task_info() -> TaskInfo:
        return info

    @app.post("/rollout", dependencies=[Depends(check_key)])
    async def do_rollout(request: RolloutRequest) -> RolloutResponse:
        try:
            result = rollout(request)
            if inspect.isawaitable(result):
                result = await result
        except Exception as error:  # noqa: BLE001 - the client scores it 0 and logs it
            logger.exception("rollout seed=%d failed", request.seed)
            raise HTTPException(status_code=500, detail=f"rollout failed: {type(error).__name__}: {error}") from None
        if isinstance(result, dict):
            result = RolloutResponse(seed=request.seed, **result)
        if not isinstance(result, RolloutResponse):
            raise HTTPException(status_code=500, detail=f"rollout returned {type(result).__name__}, expected RolloutResponse")
        return result

    return app


def serve(app: Any, host: str = "127.0.0.1", port: int = 8001) -> None:
    """Run ``app`` with uvicorn (blocking)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning")
