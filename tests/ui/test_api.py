"""The review page's /api routes through FastAPI's TestClient: the key, runs, traces, feedback."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

from fastapi.testclient import TestClient

from promptgym.cli.commands.ui import FolderRuns
from promptgym.traces import TraceStore
from promptgym.ui import create_ui_app
from tests.ui.conftest import KEY, LOCAL, fill_store


def test_every_api_route_needs_the_key_and_the_page_shell_does_not(runs_dir: Path, store: TraceStore) -> None:
    trace_id = fill_store(store)["wrong"]
    bare = TestClient(create_ui_app(FolderRuns(runs_dir), store, api_key=KEY), base_url=LOCAL)
    for path in ("/api/config", "/api/runs", "/api/traces", "/api/traces/programs", f"/api/traces/{trace_id}"):
        answer = bare.get(path)
        assert answer.status_code == 401, path
        assert answer.json()["error"]["code"] == "invalid_api_key" and KEY not in answer.text
    assert bare.post(f"/api/traces/{trace_id}/feedback", json={"rating": 1}).status_code == 401
    assert bare.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert bare.get("/api/runs", headers={"X-API-Key": KEY}).status_code == 200
    assert store.get(trace_id).feedback == ()  # the refused rating was not stored
    page = bare.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]  # nothing from the network
    assert bare.get("/static/app.js").status_code == 200


def test_runs_list_one_run_and_its_curves(client: TestClient) -> None:
    runs = client.get("/api/runs").json()["runs"]
    assert [run["name"] for run in runs] == ["beta", "alpha"]  # newest first
    beta = runs[0]
    assert beta["status"] == "completed" and beta["epochs_done"] == 3
    assert beta["final"]["scores"]["reward"] == 1.0 and beta["baseline"]["scores"]["reward"] == 0.0
    assert beta["final"]["intervals"]["reward"]["n"] == 3
    data = client.get(f"/api/runs/{beta['id']}").json()
    curves = data["curves"]
    assert curves["x"] == [0.0, 1.0, 2.0] and curves["x_label"] == "epoch"
    assert set(curves["series"]) == {"reward", "val_reward"}  # LM calls and tokens are not curves
    assert len(curves["intervals"]["val_reward"]) == 3 and curves["intervals"]["val_reward"][0][1] == 1.0
    check = data["comparisons"][0]
    assert check["accepted"] is True and check["test"]["method"] == "mcnemar-exact"
    assert check["candidate_score"]["n"] == 3 and check["incumbent_score"]["mean"] == 0.0
    (variable,) = data["variables"]
    assert variable["name"] == "answerer/state" and variable["changed"]
    assert [op["op"] for op in variable["instructions"]] == ["same"]
    assert [item["op"] for item in variable["examples"]] == ["added", "added"]  # the start had no demonstrations
    svg = client.get(f"/api/runs/{beta['id']}/curves.svg")
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert 'data-series="val_reward" data-points="3"' in svg.text and "<polyline" in svg.text


def test_a_running_run_shows_rows_as_they_are_written(client: TestClient, runs_dir: Path) -> None:
    alpha = client.get("/api/runs").json()["runs"][1]
    history = runs_dir / alpha["id"] / "history.csv"
    before = history.read_text()
    try:
        assert 'data-points="2"' in client.get(f"/api/runs/{alpha['id']}/curves.svg").text
        rows = list(csv.DictReader(before.splitlines()))
        with history.open("a") as handle:
            handle.write(",".join(str({**rows[-1], "epoch": "2", "val_reward": "0.5"}[key]) for key in rows[0]) + "\n")
        svg = client.get(f"/api/runs/{alpha['id']}/curves.svg").text
        assert 'data-series="val_reward" data-points="3"' in svg
    finally:
        history.write_text(before)


def test_two_runs_on_one_chart_and_unknown_runs(client: TestClient) -> None:
    beta, alpha = (run["id"] for run in client.get("/api/runs").json()["runs"])
    svg = client.get(f"/api/compare.svg?run={alpha}&run={beta}&series=val_reward").text
    assert svg.count("data-series=") == 2 and 'data-points="2"' in svg and 'data-points="3"' in svg
    missing = client.get("/api/runs/no-such-run")
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "run_id"
    assert "no-such-run" in missing.json()["error"]["message"]


def test_traces_filtered_by_program_version_and_rating(client: TestClient, store: TraceStore) -> None:
    ids = fill_store(store)

    def listed(query: str) -> list[str]:
        answer = client.get(f"/api/traces?{query}")
        assert answer.status_code == 200, answer.text
        return [trace["id"] for trace in answer.json()["traces"]]

    assert listed("") == [ids["v2"], ids["other"], ids["right"], ids["wrong"]]  # newest first
    assert listed("program=qa&version=v1") == [ids["other"], ids["right"], ids["wrong"]]
    assert listed("program=qa&version=v2") == [ids["v2"]]
    assert listed("rating=rated") == listed("rating=good") == [ids["right"]]
    assert listed("rating=bad") == []
    assert ids["right"] not in listed("rating=unrated")
    store.add_feedback(ids["wrong"], rating=0.0)
    assert listed("rating=bad") == [ids["wrong"]]
    bad = client.get("/api/traces?rating=great")
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "rating"
    programs = client.get("/api/traces/programs").json()["programs"]
    assert programs == [{"program": "qa", "version": "v1", "schema": True},
                        {"program": "qa", "version": "v2", "schema": False}]


def test_one_trace_module_by_module_with_its_schema(client: TestClient, store: TraceStore) -> None:
    ids = fill_store(store)
    data = client.get(f"/api/traces/{ids['wrong']}").json()
    assert [step["module"] for step in data["trace"]["modules"]] == ["think", "answerer"]
    assert data["output_schema"]["required"] == ["answer", "confidence"]
    assert data["rating"] is None and data["correction"] is None
    assert client.get(f"/api/traces/{ids['v2']}").json()["output_schema"] is None
    assert client.get("/api/traces/nope").status_code == 404


def test_feedback_checks_the_correction_against_the_stored_schema(client: TestClient, store: TraceStore) -> None:
    ids = fill_store(store)
    route = f"/api/traces/{ids['wrong']}/feedback"
    missing = client.post(route, json={"correction": {"confidence": 1.0}})
    assert missing.status_code == 422 and missing.json()["error"]["param"] == "correction.answer"
    wrong_type = client.post(route, json={"correction": {"answer": "4", "confidence": "sure"}})
    assert wrong_type.status_code == 422 and wrong_type.json()["error"]["param"] == "correction.confidence"
    assert "'sure' is not of type 'number'" in wrong_type.json()["error"]["message"]
    assert store.get(ids["wrong"]).feedback == ()  # nothing stored for the refused ones
    for body, param in (({"rating": "good"}, "rating"), ({"rating": 1, "extra": 2}, "extra"), ({}, "body"),
                        ({"comment": 3}, "comment")):
        answer = client.post(route, json=body)
        assert answer.status_code == 422 and answer.json()["error"]["param"] == param, body
    assert client.post(route, content=b"[1]", headers={"content-type": "application/json"}).status_code == 400
    saved = client.post(route, json={"correction": {"answer": "4", "confidence": 1.0}, "comment": "2+2 is 4"})
    assert saved.status_code == 200 and saved.json()["correction"] == {"answer": "4", "confidence": 1.0}
    assert client.post(route, json={"rating": 0}).status_code == 200
    trace = store.get(ids["wrong"])
    assert trace.correction == {"answer": "4", "confidence": 1.0} and trace.rating == 0.0
    assert trace.comments == ["2+2 is 4"]
    # A version without a stored schema takes any object as its correction
    assert client.post(f"/api/traces/{ids['v2']}/feedback", json={"correction": {"answer": "two"}}).status_code == 200
    unknown = client.post("/api/traces/nope/feedback", json={"rating": 1})
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "trace_id"
    assert unknown.json()["error"]["code"] == "trace_not_found" and missing.json()["error"]["code"] == "invalid_value"


def test_a_page_without_runs_or_traces_says_how_to_start_one() -> None:
    bare = TestClient(create_ui_app(None, None), base_url=LOCAL)
    assert bare.get("/api/config").json() == {"runs": False, "traces": False, "traces_path": None}
    for path, flag in (("/api/runs", "--runs"), ("/api/traces", "--traces")):
        answer = bare.get(path)
        assert answer.status_code == 404 and flag in answer.json()["error"]["message"]
    assert json.loads(bare.get("/api/nowhere").text)["error"]["type"] == "not_found_error"


def test_another_host_name_is_refused_so_a_rebinding_page_can_t_read_it(runs_dir: Path, store: TraceStore) -> None:
    app = create_ui_app(FolderRuns(runs_dir), store)  # no key: only this machine's names are answered
    assert TestClient(app, base_url="http://localhost:8765").get("/api/runs").status_code == 200
    assert TestClient(app, base_url="http://evil.example:8765").get("/api/runs").status_code == 400


def test_a_trace_store_that_can_t_be_written_is_a_503_naming_it(client: TestClient, store: TraceStore,
                                                                 monkeypatch) -> None:
    trace_id = fill_store(store)["wrong"]

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "add_feedback", full)
    answer = client.post(f"/api/traces/{trace_id}/feedback", json={"rating": 1})
    assert answer.status_code == 503 and "disk is full" in answer.json()["error"]["message"]
    assert store.path in answer.json()["error"]["message"] and "Traceback" not in answer.text


def test_a_run_whose_run_json_is_broken_is_listed_with_why(client: TestClient, runs_dir: Path) -> None:
    broken = runs_dir / "20000101-000000-broken-0000"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    try:
        runs = client.get("/api/runs").json()["runs"]
    finally:
        (broken / "run.json").unlink()
        broken.rmdir()
    (entry,) = [run for run in runs if run["id"] == broken.name]
    assert entry["status"] == "unreadable" and "run.json can't be read" in entry["error"]
    assert len(runs) == 3


def test_the_rating_value_filter_pages_through_many_rated_traces(client: TestClient, store: TraceStore,
                                                                 monkeypatch) -> None:
    monkeypatch.setattr("promptgym.ui.api.RATED_PAGE", 2)
    ratings = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    ids = []
    for index, rating in enumerate(ratings):
        ids.append(store.record(program="qa", inputs={"i": index}, created=1_900_000_000 + index // 2))  # pairs tie
        store.add_feedback(ids[-1], rating=rating)
    everything = store.traces(rated=True, newest_first=True)  # the order the page keeps: newest, then by id
    good = [trace["id"] for trace in client.get("/api/traces?rating=good").json()["traces"]]
    assert good == [trace.id for trace in everything if trace.rating == 1.0] and set(good) == {ids[0], ids[4], ids[5]}
    bad = [trace["id"] for trace in client.get("/api/traces?rating=bad&limit=3").json()["traces"]]
    assert bad == [trace.id for trace in everything if trace.rating == 0.0][:3] and bad[0] == ids[6]


def test_the_best_prompts_of_two_runs_against_each_other(client: TestClient) -> None:
    beta, alpha = (run["id"] for run in client.get("/api/runs").json()["runs"])
    data = client.get(f"/api/compare?run={alpha}&run={beta}").json()
    assert data["runs"] == [alpha, beta]
    (variable,) = data["best"]
    assert variable["name"] == "answerer/state" and {item["op"] for item in variable["examples"]} <= {"same", "added", "removed"}
    one = client.get(f"/api/compare?run={alpha}")
    assert one.status_code == 422 and one.json()["error"]["param"] == "run"


def test_the_trace_list_is_bounded_by_its_limit(client: TestClient, store: TraceStore) -> None:
    fill_store(store)
    assert len(client.get("/api/traces?limit=2").json()["traces"]) == 2
    assert client.get("/api/traces?limit=0").status_code == 422
    assert client.get("/api/traces?limit=5000").status_code == 422
