"""`[data] traces`: a train config learns from what serve recorded and people corrected."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.traces import TraceStore
from tests.cli.helpers import WORDS, only_run, write_config

runner = CliRunner()


def record_corrected_traces(folder: Path) -> None:
    store = TraceStore(folder / "served" / "traces.db")
    for i, word in enumerate(WORDS):
        trace_id = store.record(program="qa", version="v1", inputs={"question": word}, outputs={"answer": "?"},
                                created=1000.0 + i)
        store.add_feedback(trace_id, correction={"answer": word.upper()})
    store.record(program="qa", version="v1", inputs={"question": "unlabelled"}, outputs={"answer": "?"})
    store.close()


def traces_config(folder: Path, data: str) -> Path:
    config = write_config(folder)
    text = config.read_text()
    start, end = text.index("[data]"), text.index("[reward]")
    config.write_text(text[:start] + data + "\n" + text[end:])
    return config


def test_a_run_trains_on_corrected_traces_and_tests_on_the_newest(workdir: Path) -> None:
    record_corrected_traces(workdir)
    config = traces_config(workdir, '[data]\ntraces = "served"\ntraces_program = "qa"\ntraces_holdout = 0.25\n'
                                    'validation_split = 0.25')
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    status = only_run(workdir).status()
    assert status["status"] == "completed"
    assert (status["final"]["split"], status["final"]["size"]) == ("test", 4)  # 16 labelled traces: the newest 4 held out by time, scored at the end
    assert status["final"]["reward"] > status["baseline"]["reward"]


def test_traces_with_no_label_or_a_wrong_path_are_config_errors(workdir: Path) -> None:
    store = TraceStore(workdir / "served" / "traces.db")
    store.record(program="qa", inputs={"question": "x"}, outputs={"answer": "?"})
    store.close()
    result = runner.invoke(app, ["train", "--config", str(traces_config(workdir, '[data]\ntraces = "served"')),
                                 "--yes"])
    assert result.exit_code != 0 and "data.traces" in result.output and "no labelled traces" in result.output
    result = runner.invoke(app, ["train", "--config", str(traces_config(workdir, '[data]\ntraces = "nowhere"')),
                                 "--yes"])
    assert result.exit_code != 0 and "data.traces" in result.output and "no trace store" in result.output
    both = traces_config(workdir, '[data]\ntraces = "served"\ntrain = "train.jsonl"')
    result = runner.invoke(app, ["train", "--config", str(both), "--yes"])
    assert result.exit_code != 0 and "set exactly one of" in result.output
