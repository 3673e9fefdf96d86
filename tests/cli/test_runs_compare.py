"""``promptgym runs compare SERVED RETRAINED --traces DIR``: both on held-out labelled traffic, a paired test."""

from __future__ import annotations

import asyncio
import json

from typer.testing import CliRunner

import promptgym as pg
from promptgym.cli.main import app
from promptgym.traces import TraceStore
from promptgym.ui.api import held_out
from tests.lm.fake_openai_server import FakeOpenAIServer
from tests.serving.programs import qa_program


def saved(url: str, path) -> str:
    lm = pg.LanguageModel(model="openai/fake", api_base=url, api_key="unused", cache=False)
    asyncio.run(qa_program(language_model=lm)).save(str(path))
    return str(path)


def test_the_retrained_program_is_compared_on_the_newest_corrected_traces(tmp_path):
    store = TraceStore(tmp_path / "rec" / "traces.db")
    for index in range(20):
        trace_id = store.record(program="qa", inputs={"question": f"q{index}"}, outputs={"answer": "?"},
                                created=1000.0 + index)
        store.add_feedback(trace_id, correction={"answer": f"Q{index}"})
    store.record(program="qa", inputs={"question": "unlabelled"}, created=2000.0)
    upper = lambda body: json.dumps({"answer": json.loads(body["messages"][-1]["content"])["question"].upper()})  # noqa: E731
    with FakeOpenAIServer(lambda body: json.dumps({"answer": "?"})) as dull, FakeOpenAIServer(upper) as sharp:
        served, retrained = saved(dull.url, tmp_path / "served.json"), saved(sharp.url, tmp_path / "new.json")
        result = CliRunner().invoke(app, ["runs", "compare", served, retrained, "--traces", str(tmp_path / "rec"),
                                          "--holdout", "0.6", "--json"])
        asked = [json.loads(body["messages"][-1]["content"])["question"] for body in sharp.requests]
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["n"] == 12 and sorted(asked) == sorted(f"q{i}" for i in range(8, 20))  # the newest 60%
    assert (report["before"]["reward"], report["after"]["reward"]) == (0.0, 1.0)
    assert report["difference"]["wins"] == 12 and report["verdict"] == "better"
    assert report["difference"]["p_value"] < 0.001


def test_a_store_without_labelled_traces_of_the_program_is_a_clear_error(tmp_path):
    TraceStore(tmp_path / "traces.db").record(program="qa", inputs={"question": "x"})
    program = saved("http://127.0.0.1:9", tmp_path / "p.json")
    result = CliRunner().invoke(app, ["runs", "compare", program, program, "--traces", str(tmp_path)])
    assert result.exit_code == 2 and "no labelled trace of program 'qa'" in result.output


def test_a_retrained_run_keeps_the_comparison_for_the_review_page(tmp_path):
    store = TraceStore(tmp_path / "rec" / "traces.db")
    for index in range(6):
        trace_id = store.record(program="qa", inputs={"question": f"q{index}"}, created=1000.0 + index)
        store.add_feedback(trace_id, correction={"answer": f"Q{index}"})
    upper = lambda body: json.dumps({"answer": json.loads(body["messages"][-1]["content"])["question"].upper()})  # noqa: E731
    run = tmp_path / "runs" / "20261206-120000-retrain-ab12"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": run.name, "status": "completed"}))
    with FakeOpenAIServer(lambda body: json.dumps({"answer": "?"})) as dull, FakeOpenAIServer(upper) as sharp:
        served = saved(dull.url, tmp_path / "served.json")
        saved(sharp.url, run / "best_program.json")
        result = CliRunner().invoke(app, ["runs", "compare", served, "retrain", "--runs-dir", str(tmp_path / "runs"),
                                          "--traces", str(tmp_path / "rec"), "--holdout", "0"])
    assert result.exit_code == 0, result.output
    assert "retrained - served: +1.000" in result.output
    kept = held_out(run)
    assert (kept["n"], kept["program"], kept["verdict"], kept["retrained"]) == (6, "qa", "better", "retrain")
    assert (kept["before"]["reward"], kept["after"]["reward"]) == (0.0, 1.0)
