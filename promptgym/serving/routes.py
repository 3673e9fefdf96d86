"""The HTTP routes: one predict route per program, OpenAI chat completions, models, health, metrics.

Each route records what it served in ``request.state`` (program, route kind, usage, failure);
the request-log middleware turns that into the log line and the metrics.
"""

# No `from __future__ import annotations` here: FastAPI reads each predict route's body type (the
# program's input DataModel, a closure variable) from the live annotation.

import asyncio
import json
import logging
import time
from typing import Any, AsyncIterator, Awaitable, Callable

from fastapi import Body, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from promptgym.lm.errors import LMError
from promptgym.lm.usage import Usage, usage_scope
from promptgym.modules.knowledge.read_only import KnowledgeBaseWriteRefused
from promptgym.serving.admission import Busy
from promptgym.serving.chat import (
    ChatCompletionRequest, completion, plain_messages, program_input, requested_schema,
)
from promptgym.serving.errors import error_response
from promptgym.serving.programs import InputError, NoOutputError, ServedCall, ServedProgram
from promptgym.traces.feedback import FeedbackError
from promptgym.serving.context import ServerContext
from promptgym.serving.streaming import DISCONNECTED, AnswerStream, Delta, SlotStreamingResponse, StreamEnd
from promptgym.traces.store import new_trace_id

logger = logging.getLogger("promptgym.serve")


def add_routes(app: FastAPI, state: ServerContext) -> None:
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
            if body.stream:
                return await stream_program_answer(state, served, inputs, body, request)
            outcome = await run_served(state, served, inputs, request)
            if isinstance(outcome, Response):
                return outcome
            content = json.dumps(outcome, ensure_ascii=False)
            finish_reason = "length" if request.state.usage.truncated_calls else "stop"  # as OpenAI says it
        elif body.model in state.models:
            request.state.program = body.model
            if body.stream:
                return await stream_model_answer(state, body, request)
            outcome = await chat_with_model(state, body, request)
            if isinstance(outcome, Response):
                return outcome
            content, finish_reason = outcome
        else:
            request.state.program = ""
            served_names = [*sorted(state.programs), *state.model_names()]
            return error_response(404, f"model {body.model!r} is not served here; served: "
                                  f"{', '.join(served_names) or 'none'}", param="model", code="model_not_found")
        answer_id = getattr(request.state, "trace_id", None) or request.state.request_id
        return JSONResponse(completion(answer_id, body.model, content, request.state.usage, finish_reason))

    app.add_api_route("/v1/chat/completions", chat_completions, methods=["POST"], tags=["openai"],
                      summary="OpenAI-compatible chat completions")

    async def feedback(request: Request, body: Any = Body(...)) -> Response:
        """Rate a served call, correct its output or comment on it: ``{"trace_id", "rating", "correction", "comment"}``."""
        request.state.route = "feedback"
        if state.recorder is None:
            return error_response(404, "this server records no traces, so it takes no feedback: start it with "
                                  "--record DIR", code="recording_off")
        try:
            given = await asyncio.to_thread(state.recorder.feedback, body)
        except FeedbackError as error:
            request.state.failure = "invalid_input"
            return error_response(error.status, str(error), param=error.field,
                                  code="trace_not_found" if error.status == 404 else "invalid_value")
        return JSONResponse({"object": "feedback", "trace_id": given.trace_id, "created": given.created,
                             "rating": given.rating, "correction": given.correction, "comment": given.comment})

    app.add_api_route("/v1/feedback", feedback, methods=["POST"], tags=["feedback"],
                      summary="Feedback on a served call (needs --record)")

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


def predict_route(state: ServerContext, served: ServedProgram) -> Any:
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


async def run_served(state: ServerContext, served: ServedProgram, inputs: Any, request: Request) -> Any:
    """The program's output JSON, or the error response (429 busy, 422 input, 502 model, 500 other)."""
    request.state.usage = Usage()
    started = time.perf_counter()
    outcome = await in_slot(state, request, f"program {served.name!r}", lambda: served.run(inputs))
    if isinstance(outcome, Response):
        if state.recorder is not None and outcome.status_code >= 500:  # the model failed: a trace worth reading
            failed = ServedCall(None, request.state.usage, seconds=time.perf_counter() - started,
                                error=getattr(request.state, "error", None))
            record(state, request, served.name, inputs, failed)
        return outcome
    request.state.usage = outcome.usage
    record(state, request, served.name, inputs, outcome)
    return outcome.output


def record(state: ServerContext, request: Request, program: str, inputs: Any, call: ServedCall,
           trace_id: str | None = None) -> None:
    """Store the call when the server records (``--record``); its id goes back in the trace header.

    A streamed answer is recorded at its end, under the ``trace_id`` its header already carried.
    """
    if state.recorder is None:
        return
    try:  # queued: the recorder's writer commits it behind the answer
        request.state.trace_id = state.recorder.record(program, inputs, call, trace_id=trace_id)
    except Exception as error:  # noqa: BLE001 - a trace that can't be kept must not fail the answer
        state.metrics.failed(program, "trace_lost")
        logger.warning("trace of %s not stored: %s: %s", program, type(error).__name__, error)


def model_request(state: ServerContext, body: ChatCompletionRequest, request: Request) -> Any:
    """``(model, messages, schema)`` of a direct model chat, or the 400 its messages or format earn."""
    request.state.usage = Usage()
    try:
        return state.models[body.model], plain_messages(body), requested_schema(body)
    except InputError as error:
        return _input_error(request, error)


async def chat_with_model(state: ServerContext, body: ChatCompletionRequest, request: Request) -> Any:
    """``(content, finish_reason)`` from a model called directly, or the error response."""
    prepared = model_request(state, body, request)
    if isinstance(prepared, Response):
        return prepared
    model, messages, schema = prepared

    async def answer() -> Any:
        started = time.perf_counter()
        with usage_scope() as usage:
            reply = await model.respond(messages, schema=schema, temperature=body.temperature, top_p=body.top_p,
                                        max_tokens=body.max_completion_tokens or body.max_tokens)
        request.state.usage = usage
        if state.recorder is not None:
            state.recorder.describe_model(body.model)
            record(state, request, body.model, {"messages": messages},
                         ServedCall({"content": reply.content}, usage, seconds=time.perf_counter() - started))
        return reply.content, reply.finish_reason or "stop"

    return await in_slot(state, request, f"model {body.model!r}", answer)


async def in_slot(state: ServerContext, request: Request, what: str, work: Callable[[], Awaitable[Any]]) -> Any:
    """``work()`` run in one of the server's slots, or the error response its failure maps to."""
    try:
        async with state.admission.slot():
            return await work()
    except Exception as error:  # noqa: BLE001 - mapped to an answer; one failing request must not stop the server
        return error_answer(request, what, error)


def error_answer(request: Request, what: str, error: Exception) -> Response:
    """The HTTP answer a failure maps to (429 busy, 422 input, 502 model, 500 other)."""
    if isinstance(error, Busy):
        request.state.failure = "busy"
        return error_response(429, str(error), code="server_busy", headers={"Retry-After": "1"})
    if isinstance(error, InputError):
        return _input_error(request, error)
    if isinstance(error, NoOutputError):
        return _failed(request, 502, "no_output", str(error))
    if isinstance(error, LMError):
        return _failed(request, 502, "model_error", f"the language model failed: {error}")
    if isinstance(error, KnowledgeBaseWriteRefused):  # served programs open their knowledge base read-only
        return _failed(request, 409, "read_only_knowledge_base", f"{what} tried to write its knowledge base: {error}")
    return _failed(request, 500, "internal", f"{what} failed: {type(error).__name__}: {error}")


async def stream_program_answer(state: ServerContext, served: ServedProgram, inputs: Any, body: ChatCompletionRequest,
                                request: Request) -> Response:
    """The program's last output field streamed as it is written; the whole output in its trace."""
    request.state.usage = Usage()
    program_stream, call = served.stream(inputs)

    async def pieces() -> Any:
        try:
            async for text in program_stream:
                yield {"content": text}
        finally:
            await program_stream.aclose()  # cancels the run: its model stops generating

    def finished(error: str | None, trace_id: str | None) -> None:
        request.state.usage = call.usage
        if error is not None:
            call.output, call.error = None, error
        record(state, request, served.name, inputs, call, trace_id)

    return await open_stream(state, request, body, f"program {served.name!r}", pieces(),
                             lambda: StreamEnd("length" if call.usage.truncated_calls else "stop", call.usage),
                             finished)


async def stream_model_answer(state: ServerContext, body: ChatCompletionRequest, request: Request) -> Response:
    """A model's answer streamed as it writes it (reasoning as ``reasoning_content``)."""
    prepared = model_request(state, body, request)
    if isinstance(prepared, Response):
        return prepared
    model, messages, schema = prepared
    started = time.perf_counter()
    answer = model.stream(messages, schema=schema, temperature=body.temperature, top_p=body.top_p,
                          max_tokens=body.max_completion_tokens or body.max_tokens)

    async def pieces() -> Any:
        try:
            async for chunk in answer:
                delta = {key: value for key, value in chunk.items() if value}
                if delta:
                    yield delta
        finally:
            await answer.aclose()  # stops the generation (a client that left, an error)

    def usage() -> Usage:
        return Usage(calls=1, prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens)

    def finished(error: str | None, trace_id: str | None) -> None:
        request.state.usage = usage()
        if state.recorder is not None:
            state.recorder.describe_model(body.model)
            record(state, request, body.model, {"messages": messages},
                   ServedCall({"content": answer.content} if error is None else None, usage(),
                              seconds=time.perf_counter() - started, error=error), trace_id)

    return await open_stream(state, request, body, f"model {body.model!r}", pieces(),
                             lambda: StreamEnd(answer.finish_reason or "stop", usage()), finished)


async def open_stream(state: ServerContext, request: Request, body: ChatCompletionRequest, what: str,
                      pieces: AsyncIterator[Delta], finish: Callable[[], StreamEnd],
                      finished: Callable[[str | None, str | None], None]) -> Response:
    """The streamed answer in a slot held until it ends; an HTTP error if it fails before its first piece.

    ``finished(error, trace_id)`` records the call once, however it ended.
    """
    try:
        release = await state.admission.hold()
    except Busy as error:
        await pieces.aclose()  # type: ignore[attr-defined]
        return error_answer(request, what, error)
    trace_id = new_trace_id() if state.recorder is not None else None
    if trace_id is not None:
        request.state.trace_id = trace_id  # in the header, sent before the answer is
    answer_id = trace_id or request.state.request_id
    base = {"id": f"chatcmpl-{answer_id}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.model}
    response: list[Response] = []  # the error answer, when it fails before the first piece

    def done(error: str | None) -> None:
        if response:  # answered with an HTTP error: recorded like a failed call (the model's failures only)
            if response[0].status_code >= 500:
                finished(request.state.error, trace_id)
            return
        if error is not None:  # the status line is sent already: counted here, not by the middleware
            reason = "client_disconnected" if error == DISCONNECTED else "model_error"
            request.state.failure, request.state.error = reason, error
            state.metrics.failed(request.state.program, reason)
        finished(error, trace_id)

    include_usage = bool((getattr(body, "stream_options", None) or {}).get("include_usage"))
    stream = AnswerStream(base, pieces, release, finish, done, include_usage=include_usage)
    try:
        await stream.start()
    except Exception as error:  # noqa: BLE001 - mapped to an HTTP answer
        response.append(error_answer(request, what, error))
        await stream.close()
        return response[0]
    except BaseException:
        await stream.close()
        raise
    return SlotStreamingResponse(stream)


def _failed(request: Request, status: int, reason: str, message: str) -> Response:
    request.state.failure = reason
    request.state.error = message
    return error_response(status, message, code=reason)
