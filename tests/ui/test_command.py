"""``promptgym ui``'s refusals before it listens: another host, an unset key variable, a missing or corrupt store."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.commands.ui import FolderRuns
from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder

runner = CliRunner()


def refused(*arguments: str) -> str:
    result = runner.invoke(app, ["ui", *arguments])
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


def test_it_listens_on_this_machine_only() -> None:
    output = refused("--host", "0.0.0.0")
    assert "--host 0.0.0.0" in output and "this machine only" in output


def test_an_unset_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UI_TEST_KEY", raising=False)
    assert "UI_TEST_KEY is not set" in refused("--api-key-env", "UI_TEST_KEY")


def test_a_missing_or_corrupt_trace_store_is_named(tmp_path: Path) -> None:
    output = refused("--traces", str(tmp_path / "nowhere"))
    assert "nowhere" in output and "traces.db" in output
    (tmp_path / "traces.db").write_bytes(b"this is not sqlite" * 100)
    output = refused("--traces", str(tmp_path))
    assert "not a readable SQLite database" in output and str(tmp_path) in output


def test_a_polled_run_s_events_are_read_once_and_a_replaced_log_again(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path, "live")
    runs = FolderRuns(tmp_path)
    run.append_event({"event": "train_begin"})
    assert [event["event"] for event in runs.events(run.id)] == ["train_begin"]
    with run.events_path.open("a") as handle:
        handle.write('{"event": "epoch_end", "epoch": 0}\n{"event": "st')  # the last line is still being written
    assert [event["event"] for event in runs.events(run.id)] == ["train_begin", "epoch_end"]
    with run.events_path.open("a") as handle:
        handle.write('ep"}\n')
    assert [event["event"] for event in runs.events(run.id)] == ["train_begin", "epoch_end", "step"]
    run.events_path.write_text('{"event": "run_started"}\n')
    assert [event["event"] for event in runs.events(run.id)] == ["run_started"]
