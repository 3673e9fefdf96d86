"""The HTTP routes: one predict route per program, OpenAI chat completions, models, health, metrics.

Each route records what it served in ``request.state`` (program, route kind, usage, failure);
the request-log middleware turns that into the log line and the metrics.
"""

# No `from __future__ import annotations` here: FastAPI reads each predict route's body type (the
# program's input DataModel, a closure variable) from the live annotation.

import json
import logging
from typing import Any, Awaitable, Callable

from fastapi import Body, FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from promptgym.lm.errors import LMError
from promptgym.lm.usage import Usage, usage_scope
from promptgym.serving.admission import Busy
from promptgym.serving.chat import (
    ChatCompletionRequest, completion, plain_messages, program_input, requested_schema, stream_events,
)
from promptgym.serving.errors import error_response
from promptgym.serving.programs import InputError, NoOutputError, ServedProgram
from promptgym.serving.state import ServerState

logger = logging.getLogger("promptgym.serve")


def add_routes(app: FastAPI, state: ServerState) -> None:
    for served in state.programs.values():
        app.add_api_route(f"/v1/programs/{served.name}/predict", predict_route(state, served), methods=["POST"],
                          name=f"predict_{served.name}", summary=f"Run program {served.name!r}",
                          description=served.description or f"The input of {served.name!r} in, its output out.",
                          responses=_output_doc(served), tags=["programs"])

    async def unknown_program(name: str, request: Request) -> Response:
        request.state.route = "predict"
        return error_response(404, f"no program named {name!r}; served: {', '.join(sorted(state.programs)) or 'none'}",
                              param="name", code="program_not_found")

    app.add_api_route("/v1/programs/{name}/predict", unknown_program, methods=["POST"], include_in_schema=False)

    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        """OpenAI chat completions: ``model`` names a served program (or ``local/<name>``)."""
        request.state.route = "chat"
        served = state.programs.get(body.model)
        if served is not None:
            request.state.program = served.name
            try:
                payload, where = program_input(body, list((served.input_schema.get("properties") or {})))
                inputs = served.validate(payload, where)
            except InputError as error:
                return _input_error(request, error)
            outcome = await run_served(state, served, inputs, request)
            if isinstance(outcome, Response):
                return outcome
            content = json.dumps(outcome, ensure_ascii=False)
            finish_reason = "stop"
        elif body.model in state.models:
            request.state.program = body.model
            outcome = await chat_with_model(state, body, request)
            if isinstance(outcome, Response):
                return outcome
            content, finish_reason = outcome
        else:
            request.state.program = ""
            served_names = [*sorted(state.programs), *state.model_names()]
            return error_response(404, f"model {body.model!r} is not served here; served: "
                                  f"{', '.join(served_names) or 'none'}", param="model", code="model_not_found")
        answer = completion(request.state.request_id, body.model, content, request.state.usage, finish_reason)
        if body.stream:
            return StreamingResponse(iter(stream_events(answer)), media_type="text/event-stream")
        return JSONResponse(answer)

    app.add_api_route("/v1/chat/completions", chat_completions, methods=["POST"], tags=["openai"],
                      summary="OpenAI-compatible chat completions")

    async def list_models() -> dict[str, Any]:
        names = [*sorted(state.programs), *state.model_names()]
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "promptgym"}
                                           for name in names]}

    app.add_api_route("/v1/models", list_models, methods=["GET"], tags=["openai"], summary="Programs and models served")

    async def healthz() -> dict[str, Any]:
        gate = state.admission
        return {"status": "ok", "programs": sorted(state.programs), "models": state.model_names(),
                "running": gate.running, "waiting": gate.waiting}

    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["server"], summary="Liveness")

    async def metrics() -> Response:
        body, content_type = state.metrics.render()
        return Response(body, media_type=content_type)

    app.add_api_route("/metrics", metrics, methods=["GET"], tags=["server"], summary="Prometheus metrics")


def predict_route(state: ServerState, served: ServedProgram) -> Any:
    """The predict handler of one program, its body typed by the program's input DataModel."""
    if served.input_model is not None:
        async def predict(body: served.input_model, request: Request) -> Response:  # type: ignore[name-defined]
            request.state.route, request.state.program = "predict", served.name
            return _as_response(await run_served(state, served, body, request))
    else:  # a subclassed program without a declared input: any JSON object
        async def predict(request: Request, body: dict[str, Any] = Body(...)) -> Response:  # type: ignore[misc]
            request.state.route, request.state.program = "predict", served.name
            return _as_response(await run_served(state, served, body, request))
    return predict


def _as_response(outcome: Any) -> Response:
    return outcome if isinstance(outcome, Response) else JSONResponse(outcome)


def _output_doc(served: ServedProgram) -> dict[int | str, dict[str, Any]]:
    if served.output_model is not None:
        return {200: {"model": served.output_model, "description": "The program's output"}}
    return {200: {"description": "The program's output (a JSON object)"}}


def _input_error(request: Request, error: InputError) -> Response:
    request.state.failure = "invalid_input"
    return error_response(error.status, str(error), param=error.field,
                          code="invalid_json" if error.status == 400 else "invalid_value")


async def run_served(state: ServerState, served: ServedProgram, inputs: Any, request: Request) -> Any:
    """The program's output JSON, or the error response (429 busy, 422 input, 502 model, 500 other)."""
    request.state.usage = Usage()
    outcome = await in_slot(state, request, f"program {served.name!r}", lambda: served.run(inputs))
    if isinstance(outcome, Response):
        return outcome
    output, request.state.usage = outcome
    return output


async def chat_with_model(state: ServerState, body: ChatCompletionRequest, request: Request) -> Any:
    """``(content, finish_reason)`` from a model called directly, or the error response."""
    model = state.models[body.model]
    request.state.usage = Usage()
    try:
        messages = plain_messages(body)
        schema = requested_schema(body)
    except InputError as error:
        return _input_error(request, error)

    async def answer() -> Any:
        with usage_scope() as usage:
            reply = await model.respond(messages, schema=schema, temperature=body.temperature, top_p=body.top_p,
                                        max_tokens=body.max_completion_tokens or body.max_tokens)
        request.state.usage = usage
        return reply.content, reply.finish_reason or "stop"

    return await in_slot(state, request, f"model {body.model!r}", answer)


async def in_slot(state: ServerState, request: Request, what: str, work: Callable[[], Awaitable[Any]]) -> Any:
    """``work()`` run in one of the server's slots, or the error response its failure maps to."""
    try:
        async with state.admission.slot():
            return await work()
    except Busy as error:
        request.state.failure = "busy"
        return error_response(429, str(error), code="server_busy", headers={"Retry-After": "1"})
    except InputError as error:
        return _input_error(request, error)
    except NoOutputError as error:
        return _failed(request, 502, "no_output", str(error))
    except LMError as error:
        return _failed(request, 502, "model_error", f"the language model failed: {error}")
    except Exception as error:  # noqa: BLE001 - one failing request must not show a traceback or stop the server
        return _failed(request, 500, "internal", f"{what} failed: {type(error).__name__}: {error}")


def _failed(request: Request, status: int, reason: str, message: str) -> Response:
    request.state.failure = reason
    request.state.error = message
    return error_response(status, message, code=reason)
