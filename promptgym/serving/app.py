"""``create_app``: the ASGI app of ``promptgym serve`` (FastAPI routes inside the serving middleware).

    from promptgym.serving import create_app, load_programs
    app = create_app(load_programs(["qa.json"]))
    # uvicorn.run(app, host="127.0.0.1", port=8000), or fastapi.testclient.TestClient(app)
"""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Iterable

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from promptgym.lm.language_model import LanguageModel
from promptgym.serving.errors import BodyTooLarge, on_body_too_large, on_http_error, on_validation_error
from promptgym.serving.middleware import ServingMiddleware
from promptgym.serving.programs import ServedProgram, share_language_models
from promptgym.serving.routes import add_routes
from promptgym.serving.context import ServerContext, ServeSettings


def create_app(programs: dict[str, ServedProgram] | Iterable[Any], models: Iterable[LanguageModel] = (),
               settings: ServeSettings | None = None) -> ServingMiddleware:
    """The server for ``programs`` (served programs by name, or built programs named by their ``name``).

    ``models`` are language models callable directly as ``model = <model string>`` in chat
    completions; the embedded models the programs use are callable that way too. ``.state``
    on the result holds the metrics and limits, ``.app`` the FastAPI app.
    """
    served = programs if isinstance(programs, dict) else {entry.name: entry for entry in map(_served, programs)}
    shared = share_language_models((entry.program for entry in served.values()), extra=models)
    direct = {name: model for name, model in shared.items()
              if model.model_string.provider == "local" or any(model is given for given in models)}
    state = ServerContext(programs=dict(served), models=direct, settings=settings or ServeSettings())
    state.metrics.in_flight.set_function(lambda: state.admission.admitted)
    state.metrics.traces_lost.set_function(lambda: state.recorder.lost if state.recorder is not None else 0)
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if state.recorder is not None:  # shutting down: the traces still queued are committed before exit
            state.recorder.close()

    app = FastAPI(lifespan=lifespan, title="promptgym serve", summary="Trained promptgym programs over HTTP",
                  description="Each program: `POST /v1/programs/<name>/predict` with its input JSON; or "
                              "`POST /v1/chat/completions` with `model` = the program's name.")
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(BodyTooLarge, on_body_too_large)
    add_routes(app, state)
    return ServingMiddleware(app, state)


def _served(program: Any) -> ServedProgram:
    return program if isinstance(program, ServedProgram) else ServedProgram.of(program)
