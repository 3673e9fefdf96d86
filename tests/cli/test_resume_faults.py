"""Resuming after Ctrl-C, SIGTERM, kill -9 or a lost checkpoint: nothing trained twice, nothing miscounted."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder
from tests.cli.helpers import ROOT, only_run, served_config, wait_for, write_config
from tests.lm.fake_openai_server import FakeOpenAIServer

runner = CliRunner()


def history_epochs(run: RunFolder) -> list[str]:
    return [row["epoch"] for row in csv.DictReader(io.StringIO((run.path / "history.csv").read_text()))]


def stopped_after_one_epoch(workdir: Path) -> RunFolder:
    """A 2-epoch run made to look interrupted after its first epoch (checkpoint epoch_1, a history row for epoch 1 too)."""
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--yes"])
    assert result.exit_code == 0, result.output
    run = only_run(workdir)
    run.update_status(status="interrupted", epochs_done=1)
    (run.path / "summary.md").unlink()
    (run.path / "checkpoints" / "epoch_2.json").unlink()
    (run.path / "checkpoints" / "epoch_1.json").replace(run.last_checkpoint)
    return run


def test_resume_dry_run_and_declined_confirmation_train_nothing(workdir: Path) -> None:
    run = stopped_after_one_epoch(workdir)
    events = len(run.events())
    dry = runner.invoke(app, ["train", "--resume", run.id, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run: nothing resumed" in dry.output and "est. LM calls" in dry.output
    declined = runner.invoke(app, ["train", "--resume", run.id], input="n\n")
    assert declined.exit_code == 0 and "Resume this run?" in declined.output
    assert run.status()["status"] == "interrupted" and len(run.events()) == events


def test_resume_refuses_flags_it_would_ignore(workdir: Path) -> None:
    run = stopped_after_one_epoch(workdir)
    for flags in (["--seed", "3"], ["--config", "run.toml"], ["--model", "openai/x", "--dataset", "dates"]):
        result = runner.invoke(app, ["train", "--resume", run.id, "--yes", *flags])
        assert result.exit_code == 2
        assert f"{flags[0]}" in result.output and "can't be used with --resume" in result.output
    assert run.status()["status"] == "interrupted"


def test_resume_without_last_json_falls_back_to_the_newest_epoch_and_keeps_history_whole(workdir: Path) -> None:
    run = stopped_after_one_epoch(workdir)
    (run.path / "checkpoints" / "last.json").rename(run.path / "checkpoints" / "epoch_1.json")
    assert history_epochs(run) == ["0", "1"]  # epoch 2's row was written, its checkpoint is gone: it runs again
    result = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert result.exit_code == 0, result.output
    assert "checkpoints/last.json is missing; resuming from checkpoints/epoch_1.json" in result.output
    assert history_epochs(run) == ["0", "1"]
    assert run.status()["status"] == "completed"
    resumed = [event for event in run.events() if event["event"] == "resumed"]
    assert resumed[-1]["from_epoch"] == 1 and resumed[-1]["checkpoint"] == "checkpoints/epoch_1.json"


def start(workdir: Path, config: Path, delay: str = "0.08") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMPTGYM_TEST_DELAY": delay}
    return subprocess.Popen([sys.executable, "-m", "promptgym.cli.main", "train", "-c", str(config), "--yes"],
                            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def events_text(workdir: Path) -> str:
    found = next(iter((workdir / "runs").glob("*/events.jsonl")), None) if (workdir / "runs").is_dir() else None
    return found.read_text() if found else ""


def test_sigterm_to_a_foreground_run_exits_130_without_a_traceback(workdir: Path) -> None:
    process = start(workdir, write_config(workdir, epochs=4))
    wait_for(lambda: '"candidate_accepted"' in events_text(workdir))
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 130, output
    assert "Traceback" not in output and "CancelledError" not in output
    assert "promptgym train --resume" in output
    run = only_run(workdir)
    assert run.status()["status"] == "interrupted" and (run.path / "checkpoints" / "interrupted.json").is_file()


def test_after_kill_9_and_resume_the_totals_count_every_session(workdir: Path) -> None:
    def slow_answer(body: dict) -> str:
        time.sleep(0.03)
        return json.dumps({"answer": "x"})

    with FakeOpenAIServer(slow_answer) as server:
        config = served_config(workdir, server.url)
        process = start(workdir, config)
        wait_for(lambda: events_text(workdir).count('"checkpoint_saved"') >= 1 and '"step"' in events_text(workdir))
        process.kill()
        process.communicate(timeout=30)
        calls_before_kill = len(server.requests)
        run = only_run(workdir)
        result = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
        assert result.exit_code == 0, result.output
        status = run.status()
        assert status["status"] == "completed"
        # Calls still in flight when kill -9 landed were sent but never answered to the run: at most the
        # model's concurrency (8) of them go uncounted. Everything else, in both sessions, is counted.
        assert calls_before_kill > 0 and len(server.requests) - 8 <= status["lm_calls"] <= len(server.requests)
        events = run.events()
        starts = [i for i, event in enumerate(events) if event["event"] == "run_started"]
        best = max(i for i, event in enumerate(events) if event["event"] == "evaluated")
        killed = events[starts[1] - 1]["time"] - events[starts[0]]["time"]
        resumed = events[best]["time"] - events[starts[1]]["time"]  # until the final evaluation (artifacts come after)
        assert status["elapsed_s"] >= killed + resumed - 0.02  # both sessions, the one killed before it could record its own
        assert f"LM calls: {status['lm_calls']} " in (run.path / "summary.md").read_text()
