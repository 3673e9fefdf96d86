"""The JSON (and SVG) routes under ``/api/`` that the review page calls; every one needs the key when one is set.

    GET  /api/runs                          every run, newest first
    GET  /api/runs/{id}                     status, prompts before/after (diff), comparisons, curve data
    GET  /api/runs/{id}/curves.svg          its reward and validation curves
    GET  /api/compare.svg?run=A&run=B&series=val_reward     one series of several runs on one chart
    GET  /api/compare?run=A&run=B           A's best trainable variables against B's (the same diff)
    GET  /api/traces/programs               the (program, version) pairs with traces
    GET  /api/traces?program=&version=&rating=&limit=       traces, newest first
    GET  /api/traces/{id}                   one trace, module by module, with its output schema
    POST /api/traces/{id}/feedback          {"rating"?, "correction"?, "comment"?}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import Response

from promptgym.serving.auth import key_matches, presented_key
from promptgym.traces import Trace, TraceStore
from promptgym.traces.feedback import FeedbackError, take_feedback
from promptgym.training.held_out import HELD_OUT_FILE
from promptgym.ui.charts import line_chart
from promptgym.ui.run_views import comparisons, curves, program_states, run_summary, variable_diff
from promptgym.ui.sources import RunsSource, UnknownRunError

RATINGS = ("", "rated", "unrated", "good", "bad", "corrected", "uncorrected")
"""The rating filter: ``good`` is a latest rating >= 0.5, ``bad`` one below (the page rates 1 or 0)."""
GOOD = 0.5
RATED_PAGE = 500
PREVIEW_CHARS = 160
SVG = "image/svg+xml"
CODES = {401: "invalid_api_key", 422: "invalid_value"}
"""Error codes as ``POST /v1/feedback`` gives them (a 404 names what is missing)."""


class ApiError(HTTPException):
    """An error answer naming the field (``param``) that is wrong."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(status, message)
        self.param = param
        self.code = code or CODES.get(status)


def key_check(api_key: str | None):
    """A dependency refusing requests without ``api_key`` (None: open); the key is never echoed."""
    def check(request: Request) -> None:
        if api_key and not key_matches(api_key, presented_key(dict(request.headers))):
            raise ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>' "
                                "(the page asks for it once per browser tab)", "authorization")
    return check


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…"


def trace_summary(trace: Trace) -> dict[str, Any]:
    return {"id": trace.id, "created": trace.created, "program": trace.program, "version": trace.version,
            "inputs": _preview(trace.inputs), "outputs": _preview(trace.outputs), "rating": trace.rating,
            "corrected": trace.correction is not None, "comments": len(trace.comments),
            "latency_ms": trace.latency_ms, "error": trace.error, "model": trace.model}


def _rating_matches(trace: Trace, rating: str) -> bool:
    if rating == "good":
        return trace.rating is not None and trace.rating >= GOOD
    if rating == "bad":
        return trace.rating is not None and trace.rating < GOOD
    return True


def by_rating_value(store: TraceStore, filters: dict[str, Any], rating: str, limit: int) -> list[Trace]:
    """The newest ``limit`` rated traces whose latest rating is good (or bad), read a page at a time: the
    store filters on "rated", not on the value, and a store may hold many rated traces."""
    kept: list[Trace] = []
    until: float | None = None
    while len(kept) < limit:
        page = store.traces(**filters, until=until, newest_first=True, limit=RATED_PAGE)
        if not page:
            break
        oldest = page[-1].created
        # The page may cut through traces recorded at one instant: take that instant whole, in the store's order.
        tied = store.traces(**filters, since=oldest, until=math.nextafter(oldest, math.inf), newest_first=True)
        kept += [trace for trace in [*(t for t in page if t.created > oldest), *tied] if _rating_matches(trace, rating)]
        if len(page) < RATED_PAGE:
            break
        until = oldest
    return kept[:limit]


def held_out(run_path: Path) -> dict[str, Any] | None:
    """What ``promptgym runs compare SERVED RUN --traces DIR`` kept in the run's folder, or None."""
    try:
        return json.loads((run_path / HELD_OUT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def api_router(runs: RunsSource | None, traces: TraceStore | None, api_key: str | None) -> APIRouter:
    router = APIRouter(prefix="/api", dependencies=[Depends(key_check(api_key))])

    def runs_source() -> RunsSource:
        if runs is None:
            raise ApiError(404, "this page was started without a runs folder (promptgym ui --runs DIR)", "runs")
        return runs

    def store() -> TraceStore:
        if traces is None:
            raise ApiError(404, "this page was started without a trace store (promptgym ui --traces DIR)", "traces")
        return traces

    def status_of(run_id: str) -> dict[str, Any]:
        try:
            return runs_source().status(run_id)
        except UnknownRunError as error:
            raise ApiError(404, str(error).strip("'\""), "run_id", "run_not_found") from None

    @router.get("/config")
    def config() -> dict[str, Any]:
        return {"runs": runs is not None, "traces": traces is not None,
                "traces_path": traces.path if traces is not None else None}

    @router.get("/runs")
    def list_runs() -> dict[str, Any]:
        return {"runs": [run_summary(status) for status in runs_source().runs()]}

    @router.get("/runs/{run_id}")
    def one_run(run_id: str) -> dict[str, Any]:
        status = status_of(run_id)
        source = runs_source()
        events = source.events(status["id"])
        path = source.path(status["id"])
        series, xs, bands, x_label = curves(path / "history.csv", events)
        states = program_states(path)
        return {"run": run_summary(status), "curves": {"x": xs, "x_label": x_label, "series": series,
                                                       "intervals": bands},
                "comparisons": comparisons(events), "variables": variable_diff(states["before"], states["after"]),
                "variables_source": states["source"], "held_out": held_out(path)}

    @router.get("/runs/{run_id}/curves.svg")
    def run_curves(run_id: str) -> Response:
        status = status_of(run_id)
        source = runs_source()
        series, xs, bands, x_label = curves(source.path(status["id"]) / "history.csv", source.events(status["id"]))
        return Response(line_chart(series, xs, bands, title=str(status.get("name") or status["id"]),
                                   x_label=x_label), media_type=SVG)

    @router.get("/compare.svg")
    def compare(run: list[str] = Query(..., description="run ids (two or more)"),
                series: str = "val_reward") -> Response:
        source = runs_source()
        lines: dict[str, list[float]] = {}
        bands: dict[str, list[Any]] = {}
        longest: list[float] = []
        for run_id in run:
            status = status_of(run_id)
            values, xs, intervals, _ = curves(source.path(status["id"]) / "history.csv", source.events(status["id"]))
            label = f"{status.get('name') or ''} {status['id'][-4:]}".strip()
            lines[label] = values.get(series, [])
            if series in intervals:
                bands[label] = intervals[series]
            longest = xs if len(xs) > len(longest) else longest
        return Response(line_chart(lines, longest, bands, title=series), media_type=SVG)

    @router.get("/compare")
    def compare_best(run: list[str] = Query(..., description="two run ids")) -> dict[str, Any]:
        if len(run) != 2:
            raise ApiError(422, f"run: expected two run ids to compare, got {len(run)}", "run")
        first, second = (status_of(run_id)["id"] for run_id in run)
        source = runs_source()
        before, after = (program_states(source.path(run_id))["after"] for run_id in (first, second))
        return {"runs": [first, second], "best": variable_diff(before, after)}

    @router.get("/traces/programs")
    def trace_programs() -> dict[str, Any]:
        found = store()
        return {"programs": [{"program": program, "version": version,
                              "schema": found.program_schemas(program, version) is not None}
                             for program, version in found.programs()]}

    @router.get("/traces")
    def list_traces(program: Optional[str] = None, version: Optional[str] = None, rating: str = "",
                    limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
        if rating not in RATINGS:
            raise ApiError(422, f"rating: expected one of {', '.join(repr(r) for r in RATINGS)}, got {rating!r}",
                           "rating")
        rated = {"rated": True, "unrated": False, "good": True, "bad": True}.get(rating)
        corrected = {"corrected": True, "uncorrected": False}.get(rating)
        filters = {"program": program or None, "version": version, "rated": rated, "corrected": corrected}
        if rating in ("good", "bad"):
            kept = by_rating_value(store(), filters, rating, limit)
        else:
            kept = store().traces(**filters, newest_first=True, limit=limit)
        return {"traces": [trace_summary(trace) for trace in kept]}

    @router.get("/traces/{trace_id}")
    def one_trace(trace_id: str) -> dict[str, Any]:
        found = store()
        trace = found.get(trace_id)
        if trace is None:
            raise ApiError(404, f"no trace {trace_id!r} in {found.path}", "trace_id", "trace_not_found")
        schemas = found.program_schemas(trace.program, trace.version)
        return {"trace": trace.to_dict(), "rating": trace.rating, "correction": trace.correction,
                "output_schema": schemas[1] if schemas else None}

    @router.post("/traces/{trace_id}/feedback")
    def feedback(trace_id: str, body: Any = Body(...)) -> dict[str, Any]:
        try:
            item = take_feedback(store(), trace_id, body)
        except FeedbackError as error:
            raise ApiError(error.status, str(error), error.field,
                           "trace_not_found" if error.status == 404 else None) from None
        return {"trace_id": trace_id, "rating": item.rating, "correction": item.correction, "comment": item.comment}

    return router
