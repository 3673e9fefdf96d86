"""The loop through the page: calls ``serve --record`` stored, corrected in the review page, read back as
training data by ``datasets.from_traces``."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from promptgym.datasets import from_traces
from promptgym.traces import TraceStore
from promptgym.ui import create_ui_app
from tests.serving.conftest import client_for, qa  # noqa: F401 - qa is the served program's fixture
from tests.ui.conftest import LOCAL


def test_a_served_call_corrected_in_the_page_is_a_training_label(qa, tmp_path: Path) -> None:  # noqa: F811
    server = client_for([qa], record=str(tmp_path))
    ids = [server.post("/v1/programs/qa/predict", json={"question": question}).headers["x-promptgym-trace-id"]
           for question in ("two plus two", "capital of france")]
    server.app.state.recorder.flush()  # serve writes traces behind its answers
    with TraceStore(tmp_path / "traces.db") as store:
        page = TestClient(create_ui_app(None, store), base_url=LOCAL)
        listed = page.get("/api/traces?program=qa").json()["traces"]
        assert [trace["id"] for trace in listed] == ids[::-1]
        trace = page.get(f"/api/traces/{ids[0]}").json()
        assert trace["output_schema"]["required"] == ["answer"]  # the schema serve stored for this version
        assert trace["trace"]["outputs"] == {"answer": "TWO PLUS TWO"}
        bad = page.post(f"/api/traces/{ids[0]}/feedback", json={"correction": {"answer": 4}})
        assert bad.status_code == 422 and bad.json()["error"]["param"] == "correction.answer"
        assert page.post(f"/api/traces/{ids[0]}/feedback", json={"correction": {"answer": "4"}}).status_code == 200
        assert page.post(f"/api/traces/{ids[1]}/feedback", json={"rating": 0}).status_code == 200
    x, y = from_traces(tmp_path, program="qa")
    assert [item.get("question") for item in x] == ["two plus two"] and [item.get("answer") for item in y] == ["4"]
