"""`promptgym train` end to end with the scripted LM: artifacts, errors, interrupt + resume, detached runs."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import promptgym.cli.artifacts as artifacts
from promptgym.cli.artifacts import plotted_history, write_plots
from promptgym.cli.main import app
from promptgym.runs.history import history_columns
from tests.cli.helpers import ROOT, only_run, wait_for, write_config

runner = CliRunner()


def test_full_run_writes_every_artifact(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(workdir)
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert "est. LM calls" in result.output and "epoch 2:" in result.output and "headroom check 3" in result.output
    assert "best on 3 validation examples: reward=1.000 (95% CI 0.439-1.000)" in result.output
    assert "headroom check: the starting program scores 0.000 [0.000, 0.561] (n=3) on 3 validation examples" \
        in result.output
    run = only_run(workdir)
    for name in ("config.toml", "events.jsonl", "history.csv", "best_program.json", "summary.md",
                 "candidates.json", "checkpoints/last.json", "checkpoints/epoch_1.json", "checkpoints/epoch_2.json",
                 "plots/training_history.png", "plots/before_after.png"):
        assert (run.path / name).is_file(), name
    columns = history_columns(run.path / "history.csv")
    assert {"cost_usd_inference", "saved_usd", "unpriced_calls", "lm_calls_inference"} <= set(columns)
    # the plot draws quality, calls, tokens and the total cost; the breakdowns stay in history.csv
    assert sorted(plotted_history(columns)) == ["completion_tokens", "cost_usd", "lm_calls", "prompt_tokens",
                                                "reward", "val_reward"]
    drawn: dict = {}
    monkeypatch.setattr(artifacts, "plot_history", lambda history, to_folder, **_: drawn.update(history) or to_folder / "h.png")
    write_plots(run)
    assert sorted(drawn) == sorted(plotted_history(columns))
    status = run.status()
    assert status["status"] == "completed" and status["epochs_done"] == 2
    assert status["final"]["reward"] > status["baseline"]["reward"]
    before, after = (status[key]["statistics"] for key in ("baseline", "final"))
    assert len(before["scores"]["reward"]) == len(after["scores"]["reward"]) == status["final"]["size"]
    interval = after["intervals"]["reward"]
    assert interval["low"] <= status["final"]["reward"] <= interval["high"] and interval["n"] == status["final"]["size"]
    summary = (run.path / "summary.md").read_text()
    assert "Improvement: **+" in summary and "answerer/state" in summary and "## Top candidates" in summary
    assert "| 95% CI |" in summary and "(mcnemar-exact) on the same 3 examples" in summary
    assert "Validation, last epoch (95% CI): `val_reward` 1.000 [0.439, 1.000] (n=3)" in summary
    kinds = [event["event"] for event in run.events()]
    for kind in ("run_started", "train_begin", "candidate_proposed", "candidate_accepted", "epoch_end",
                 "checkpoint_saved", "train_end", "run_finished"):
        assert kind in kinds
    rows = list(csv.DictReader(io.StringIO((run.path / "history.csv").read_text())))
    assert [row["epoch"] for row in rows] == ["0", "1"]
    from promptgym.programs.program import Program

    best = Program.load(str(run.path / "best_program.json"))
    assert best.get_variables()["answerer/state"]["examples"]


def test_dry_run_previews_and_starts_nothing(workdir: Path) -> None:
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--dry-run", "--examples", "5"])
    assert result.exit_code == 0, result.output
    assert "train 4, validation 1 (held out of the 5 training examples" in result.output  # one count per split
    assert "reward        │ ExactMatch" in result.output and "dry run" in result.output
    assert not (workdir / "runs").exists()


def test_knn_few_shot_from_toml_plans_no_training_run(workdir: Path) -> None:
    result = runner.invoke(app, ["train", "-c", str(ROOT / "examples/configs/dates_knn.toml"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "KNNFewShot" in result.output and "training runs 0" in result.output
    # 88: headroom 8 + retrieval and a fixed set raced on 10 validation examples + 2 x 30 test
    assert "<= 88 (headroom check 8, training runs 0, candidate scoring" in result.output


def test_config_discovery_and_confirmation(workdir: Path) -> None:
    write_config(workdir)
    result = runner.invoke(app, ["train", "--dry-run"])
    assert result.exit_code == 0 and "using config run.toml" in result.output
    declined = runner.invoke(app, ["train"], input="n\n")
    assert declined.exit_code == 0 and not (workdir / "runs").exists()


def test_bad_config_and_missing_file_exit_clearly(workdir: Path) -> None:
    config = write_config(workdir, extra="batch_sise = 3")
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 2
    assert "training.batch_sise: unknown key" in result.output
    config = write_config(workdir)
    config.write_text(config.read_text().replace("train.jsonl", "missing.jsonl"))
    result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert result.exit_code == 2 and "data.train:" in result.output and "missing.jsonl: no such file" in result.output
    result = runner.invoke(app, ["train", "-c", str(workdir / "absent.toml"), "--yes"])
    assert result.exit_code == 2 and "no such config file" in result.output


def test_secrets_never_reach_output_or_files(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-top-secret-value-42"
    (workdir / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder")  # restored after the test
    config = write_config(workdir)
    config.write_text(config.read_text().replace("[job]", f'[model]\napi_key_env = "OPENAI_API_KEY"\napi_base = "http://x/{secret}"\n[job]'))
    result = runner.invoke(app, ["train", "-c", str(config), "--env-file", ".env", "--yes"])
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    run = only_run(workdir)
    for path in run.path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".toml", ".md", ".csv"):
            assert secret not in path.read_text(), path


def test_ctrl_c_mid_run_then_resume_loses_nothing(workdir: Path) -> None:
    config = write_config(workdir, epochs=4)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMPTGYM_TEST_DELAY": "0.08"}
    # A test run started in the background (`make test &`) inherits SIGINT ignored; a user's terminal doesn't.
    process = subprocess.Popen([sys.executable, "-m", "promptgym.cli.main", "train", "-c", str(config), "--yes"],
                               cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Interrupt inside the first epoch, while calls are still slow: later epochs re-use memoised
    # scores and finish in milliseconds, so waiting for an epoch checkpoint raced with the end of the run.
    events_file = lambda: next(iter((workdir / "runs").glob("*/events.jsonl")), None)  # noqa: E731
    wait_for(lambda: (workdir / "runs").is_dir() and events_file() is not None
             and '"candidate_accepted"' in events_file().read_text())
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 130, output
    assert "promptgym train --resume" in output
    run = only_run(workdir)
    status = run.status()
    assert status["status"] == "interrupted" and status.get("epochs_done", 0) < 4
    assert (run.path / "checkpoints" / "interrupted.json").is_file()
    before = json.loads(run.last_checkpoint.read_text())["optimizer_state"]
    events_before = len(run.events())

    result = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert result.exit_code == 0, result.output
    status = run.status()
    assert status["status"] == "completed" and status["epochs_done"] == 4
    assert status["baseline"]["reward"] is not None
    rows = list(csv.DictReader(io.StringIO((run.path / "history.csv").read_text())))
    assert [row["epoch"] for row in rows] == ["0", "1", "2", "3"]
    after = json.loads((run.path / "candidates.json").read_text())["candidates"]
    kept = {c["id"]: c["variables"] for c in after}
    for candidate in before["candidates"]:  # every candidate scored before the interrupt survived
        assert kept[candidate["id"]] == candidate["variables"]
    events = run.events()
    assert len(events) > events_before and [e["event"] for e in events].count("run_started") == 2
    assert any(e["event"] == "resumed" for e in events)


def test_a_kill_mid_epoch_loses_at_most_the_step_in_flight(workdir: Path) -> None:
    config = write_config(workdir, epochs=2)  # 12 training examples in batches of 3: 4 steps per epoch
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMPTGYM_TEST_DELAY": "0.08"}
    process = subprocess.Popen([sys.executable, "-m", "promptgym.cli.main", "train", "-c", str(config), "--yes"],
                               cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events_file = lambda: next(iter((workdir / "runs").glob("*/events.jsonl")), None)  # noqa: E731

    def steps_done() -> list[dict]:
        path = events_file()
        lines = path.read_text().splitlines() if path is not None else []
        return [e for e in map(json.loads, lines) if e["event"] == "step"]

    wait_for(lambda: (workdir / "runs").is_dir() and any(e["step"] >= 1 and e["epoch"] == 0 for e in steps_done()))
    process.kill()  # kill -9: no handler runs, nothing is saved on the way out
    process.wait(timeout=30)
    last = steps_done()[-1]
    run = only_run(workdir)

    result = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert result.exit_code == 0, result.output
    events = run.events()
    resumed = next(e for e in events if e["event"] == "resumed")
    after = [(e["epoch"], e["step"]) for e in events[events.index(resumed):] if e["event"] == "step"]
    # Every step finished before the kill was checkpointed: the run goes on with the next one, repeating none.
    assert (resumed["from_epoch"], resumed["from_step"]) == (last["epoch"], last["step"] + 1)
    assert after[0] == ((last["epoch"], last["step"] + 1) if last["step"] < 3 else (last["epoch"] + 1, 0))
    assert run.status()["status"] == "completed"


def test_detached_run_and_runs_commands(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(workdir)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the detached worker imports the test factory
    result = runner.invoke(app, ["train", "-c", str(config), "--yes", "--no-poll"])
    assert result.exit_code == 0, result.output
    run = only_run(workdir)
    assert run.id in result.output
    watched = runner.invoke(app, ["runs", "watch", run.id])
    assert watched.exit_code == 0, watched.output
    assert f"run {run.id}: completed" in watched.output and "epoch 2:" in watched.output
    listed = runner.invoke(app, ["runs", "list"])
    assert run.id[:15] in listed.output and "completed" in listed.output
    shown = runner.invoke(app, ["runs", "show", run.id])
    assert "Improvement" in shown.output
    assert runner.invoke(app, ["runs", "show", "nope"]).exit_code == 2


def test_chart_stream_format(workdir: Path) -> None:
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir)), "--yes", "--stream-format", "chart"])
    assert result.exit_code == 0, result.output
    assert "train reward" in result.output


def test_export_sft_data_distils_a_finished_run(workdir: Path) -> None:
    config = write_config(workdir)
    assert runner.invoke(app, ["train", "--config", str(config), "--yes"]).exit_code == 0
    run = only_run(workdir)
    output = workdir / "distilled.jsonl"
    result = runner.invoke(app, ["export-sft-data", "--run", run.id, "-o", str(output)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert rows and f"{len(rows)} rows from {len(rows)} examples" in result.output
    for row in rows:
        roles = [message["role"] for message in row["messages"]]
        assert roles == ["system", "user", "assistant"]  # demonstrations left out
        question = json.loads(row["messages"][1]["content"])["question"]
        assert json.loads(row["messages"][2]["content"]) == {"answer": question.upper()}
    refused = runner.invoke(app, ["export-sft-data", "-o", str(output)])
    assert refused.exit_code == 2 and "either --run RUN_ID or --config FILE" in refused.output


def chain_config(workdir: Path, stages: str) -> Path:
    config = write_config(workdir, epochs=1)
    single = '[optimizer]\nname = "randomfewshot"\nparams = { nb_max_examples = 2 }\n'
    text = config.read_text()
    assert single in text
    config.write_text(text.replace(single, stages))
    return config


def test_a_chain_of_stages_from_toml_previews_and_summarises_each_stage(workdir: Path) -> None:
    config = chain_config(workdir, '[[optimizer.stages]]\nname = "randomfewshot"\nparams = { nb_max_examples = 2 }\n\n'
                                   '[[optimizer.stages]]\nname = "greedy"\n')
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    assert "stage 1" in result.output and "stage 2" in result.output and "Sequence" in result.output
    run = only_run(workdir)
    summary = (run.path / "summary.md").read_text()
    assert "## Stages" in summary and "| 1:RandomFewShot | 1.000 [0.439, 1.000] (n=3) |" in summary
    assert "| 2:GreedyOptimizer |" in summary
    rows = list(csv.DictReader(io.StringIO((run.path / "history.csv").read_text())))
    assert [row["stage"] for row in rows] == ["1:RandomFewShot", "2:GreedyOptimizer"]


def test_a_finetune_stage_previews_its_sft_steps(workdir: Path) -> None:
    config = chain_config(workdir, '[[optimizer.stages]]\nname = "randomfewshot"\n\n'
                                   '[[optimizer.stages]]\nname = "finetune"\nparams = { n_epochs = 2, batch_size = 3 }\n')
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "FineTune: <=" in result.output and "SFT <= 6 steps per base model (9 rows, batch 3, 2 epoch(s))" \
        in result.output.replace("│\n│", "").replace("\n", " ").replace("  ", " ") or "SFT <= 6 steps" in result.output


def test_stages_with_another_optimizer_name_are_an_error(workdir: Path) -> None:
    config = chain_config(workdir, '[optimizer]\nname = "gepa"\n\n[[optimizer.stages]]\nname = "randomfewshot"\n')
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert result.exit_code != 0 and "stages make a \"sequence\"" in result.output
