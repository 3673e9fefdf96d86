"""The fault pass over the weight flows' commands (issue 27): registry, runs list, event log, export-sft-data checks.

Each test failed before its fix: a traceback, a hidden entry, a pid signalled blindly, rows written on a NaN.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder
from promptgym.lm.finetuned_models import FineTunedModel, register_finetuned_model
from promptgym.training.sft_export import check_min_reward

runner = CliRunner()


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    folder = tmp_path / "models" / "finetuned"
    folder.mkdir(parents=True)
    return folder


def test_models_list_names_unreadable_entries_and_remove_deletes_them(workdir: Path, registry: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    register_finetuned_model(FineTunedModel(name="ft-good", base="local/smollm2-135m-instruct", run="r1", created=1.0))
    (registry / "ft-corrupt.json").write_text("{not json")
    (registry / "ft-badtype.json").write_text(json.dumps({"name": "ft-badtype", "base": "b", "created": "yesterday",
                                                          "merged": 5}))
    (registry / "ft-file.json").write_text(json.dumps({"name": "ft-other", "base": "b", "created": 2.0}))
    listed = runner.invoke(app, ["models", "list"])
    assert listed.exit_code == 0, listed.output
    assert "local/ft-good" in listed.output
    for name in ("ft-corrupt", "ft-badtype", "ft-file"):
        assert f"local/{name}" in listed.output and f"promptgym models remove {name}" in listed.output
    assert "created: expected a number" in listed.output and "merged: expected a path or null" in listed.output
    assert "'ft-other' differs from the file's name 'ft-file'" in listed.output
    for name in ("ft-corrupt", "ft-badtype", "ft-file"):
        removed = runner.invoke(app, ["models", "remove", name])
        assert removed.exit_code == 0 and "removed the unreadable entry" in removed.output, removed.output
        assert not (registry / f"{name}.json").exists()
    assert runner.invoke(app, ["models", "remove", "ft-other"]).exit_code == 2  # listed and removed by one name
    assert sorted(path.name for path in registry.iterdir()) == ["ft-good.json"]


def test_models_list_never_cuts_a_model_string_at_80_columns(workdir: Path, registry: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    name = "ft-a-rather-long-fine-tuned-model-name-1a2b"
    register_finetuned_model(FineTunedModel(name=name, base="local/smollm2-135m-instruct", run="r1", created=1.0))
    listed = runner.invoke(app, ["models", "list"])
    assert listed.exit_code == 0 and f"local/{name}" in listed.output


def weight_run(workdir: Path, name: str, **status: object) -> RunFolder:
    run = RunFolder.create(workdir / "runs", name)
    run.update_status(**status)
    return run


def test_runs_list_shows_weight_runs_in_their_own_terms_and_notes_unreadable_ones(workdir: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    weight_run(workdir, "tuned", job_type="sft", status="completed", steps_done=12, total_steps=12, final_loss=0.4321,
               model_id="local/ft-tuned-1a2b")
    weight_run(workdir, "rewarded", job_type="rl", status="completed", iterations_done=30, iterations=30,
               eval_reward_before=0.125, eval_reward_after=0.664, model_id="local/ft-rewarded-9f9f")
    broken = weight_run(workdir, "broken", status="completed")
    (broken.path / "run.json").write_text("{half")
    listed = runner.invoke(app, ["runs", "list"])
    assert listed.exit_code == 0, listed.output
    out = listed.output
    assert "12/12 steps" in out and "loss 0.432" in out and "local/ft-tuned-1a2b" in out
    assert "30/30 iterations" in out and "0.125" in out and "0.664" in out and "local/ft-rewarded-9f9f" in out
    assert "epoch(s)" not in out
    assert f"{broken.id}: not listed, its run.json can't be read" in out


def test_an_event_after_a_half_written_line_starts_a_new_line(workdir: Path) -> None:
    run = RunFolder.create(workdir / "runs", "killed")
    run.append_event({"event": "run_started"})
    with run.events_path.open("a", encoding="utf-8") as handle:
        handle.write('{"event": "sft_st')  # the session was killed mid-write
    run.append_event({"event": "run_started", "resume": True})
    bad: list[int] = []
    events, _ = run.read_events(on_bad_line=lambda number, text: bad.append(number))
    assert [event["event"] for event in events] == ["run_started", "run_started"] and events[1]["resume"] is True
    assert bad == [2]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.5, 2.0, True])
def test_a_min_reward_that_is_not_a_number_in_0_1_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match="min_reward: expected a number between 0 and 1"):
        check_min_reward(value)


@pytest.mark.parametrize("value", ["nan", "inf", "2", "-1"])
def test_export_sft_data_refuses_a_bad_min_reward_before_running_anything(workdir: Path, value: str) -> None:
    result = runner.invoke(app, ["export-sft-data", "-c", "nothing.toml", "-o", "out.jsonl", "--min-reward", value])
    assert result.exit_code == 2 and "--min-reward: expected a number between 0 and 1" in result.output
    assert not (workdir / "out.jsonl").exists()


def test_export_sft_data_names_a_directory_output_and_a_missing_program_once(workdir: Path) -> None:
    (workdir / "adir").mkdir()
    result = runner.invoke(app, ["export-sft-data", "-c", "nothing.toml", "-o", "adir"])
    assert result.exit_code == 2 and "--output: adir is a directory" in result.output
    result = runner.invoke(app, ["export-sft-data", "-c", "nothing.toml", "-o", "o.jsonl", "--program", "gone.json"])
    assert result.exit_code == 2 and result.output.count("gone.json") == 1, result.output
