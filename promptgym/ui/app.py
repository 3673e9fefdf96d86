"""``create_ui_app``: the review page's ASGI app (FastAPI, like ``promptgym serve``).

The page itself (``static/``: HTML, one script, one stylesheet) holds no data and is
served without the key; everything it shows comes from ``/api/...``, behind the key.
Its Content-Security-Policy allows only this server's own files: nothing is fetched
from the network.

    from promptgym.traces import TraceStore
    app = create_ui_app(runs=None, traces=TraceStore("traces/traces.db"), api_key=None)
    # uvicorn.run(app, host="127.0.0.1", port=8765), or fastapi.testclient.TestClient(app)
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from promptgym.serving.errors import error_response, on_validation_error
from promptgym.traces import TraceStore
from promptgym.ui.api import api_router
from promptgym.ui.sources import RunsSource

STATIC = Path(__file__).parent / "static"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
"""The Host headers answered: a web page elsewhere that rebinds its own name to 127.0.0.1 (DNS
rebinding) sends its name, and gets a 400 instead of the traces."""
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


async def on_http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    message = error.detail if isinstance(error.detail, str) else "request failed"
    if error.status_code == 404 and message == "Not Found":
        message = f"no route {request.method} {request.url.path}; the page is at / and its data under /api/"
    elif error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(error.status_code, message, getattr(error, "param", None), code=getattr(error, "code", None))


def on_store_error(store: TraceStore | None):
    """A trace store that can't be read or written (a full disk, a file gone bad): 503 naming it, no traceback."""
    async def handle(request: Request, error: sqlite3.Error) -> JSONResponse:
        where = store.path if store is not None else "the trace store"
        return error_response(503, f"trace store {where} can't be used right now ({error}); nothing was saved by "
                                   "this request", "traces", code="store_unavailable")
    return handle


def create_ui_app(runs: RunsSource | None, traces: TraceStore | None, api_key: str | None = None,
                  hosts: Sequence[str] = LOCAL_HOSTS) -> FastAPI:
    """The review page over ``runs`` (run folders) and ``traces`` (a trace store); either may be None.

    ``api_key``: the key every ``/api/`` request must carry (``Authorization: Bearer`` or
    ``X-API-Key``, as for ``serve``); None leaves the page open to this machine. ``hosts``: the
    ``Host`` headers answered (this machine's names; ``("testserver",)`` for a TestClient).
    """
    app = FastAPI(title="promptgym ui", summary="Review runs and served traces", docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(sqlite3.Error, on_store_error(traces))
    app.include_router(api_router(runs, traces, api_key))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.middleware("http")
    async def security_headers(request: Request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))
    return app
