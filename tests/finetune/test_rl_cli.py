"""`promptgym train` with job.type = "rl" and `task_app = <file>`: the app started and stopped by the CLI, the
final status JSON, a refused key, resume, and a prompt-learning config naming the same app file."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder, list_runs
from tests.finetune.interrupting import sigterm_mid_run

runner = CliRunner()
APP_FILE = Path(__file__).with_name("tiny_task_app.py")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))  # the launched app imports tests.finetune
    for name in ("TASK_APP_API_KEY", "TINY_FAIL_SEEDS", "TINY_SLOW_SEEDS", "TINY_BAD_JSON_SEEDS", "TINY_CONSTANT",
                 "TINY_DELAY_S", "TINY_EXIT_SEEDS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def write_config(folder: Path, model: Path, data: str = f'task_app = "{APP_FILE}"', iterations: int = 2,
                 rl: str = "eval_every = 0") -> Path:
    config = folder / "rl.toml"
    config.write_text(f"""
[job]
type = "rl"
name = "tiny-rl"

[data]
{data}

[rl]
base_model = "{model}"
iterations = {iterations}
batch_size = 2
group_size = 2
max_new_tokens = 4
learning_rate = 0.05
save_steps = 1
{rl}

[rl.lora]
r = 4
alpha = 8
""")
    return config


def pids_in(text: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"\(pid (\d+)", text)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_run_starts_the_app_trains_prints_the_final_status_and_stops_the_app(workdir: Path, tiny_model: Path,
                                                                              fake_export) -> None:
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir, tiny_model)), "--yes"])
    assert result.exit_code == 0, result.output
    output = result.output
    assert "task app tiny_task_app.py started on http://127.0.0.1:" in output
    for expected in ("RL (GRPO) on task 'tiny'", "iteration 1/2", "iteration 2/2", "zero-signal", "tok/s",
                     "eval reward", "model ready: local/ft-tiny-rl-"):
        assert expected in output, expected
    final = json.loads(output[output.rindex("\n{\n") + 1:])  # the last thing printed
    assert set(final) == {"status", "final_reward", "eval_reward_before", "eval_reward_after", "model_id", "checkpoints"}
    assert final["status"] == "completed" and [c["iteration"] for c in final["checkpoints"]] == [1, 2]
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    assert json.loads((run.path / "final_status.json").read_text()) == final
    status = run.status()
    assert status["status"] == "completed" and status["job_type"] == "rl" and status["final_status"] == final
    assert 'task_app = "' in (run.path / "config.toml").read_text()  # the file, not the port: a resume starts it again
    assert pids_in(output) and not any(alive(pid) for pid in pids_in(output))
    assert "task app tiny_task_app.py stopped" in output
    shown = runner.invoke(app, ["runs", "show", run.id])
    assert shown.exit_code == 0 and "completed" in shown.output
    watched = runner.invoke(app, ["runs", "watch", run.id])
    assert watched.exit_code == 0 and "iteration 2/2" in watched.output
    # the tuned model is in the registry SFT uses, and is a model string
    listed = runner.invoke(app, ["models", "list"])
    assert listed.exit_code == 0 and final["model_id"] in listed.output and str(tiny_model) in listed.output
    from promptgym.lm import LanguageModel

    assert LanguageModel(model=final["model_id"]).get_config()["model"] == final["model_id"]


def test_the_chart_stream_plots_train_and_eval_reward(workdir: Path, tiny_model: Path, fake_export) -> None:
    config = write_config(workdir, tiny_model, iterations=3, rl="eval_every = 2")
    result = runner.invoke(app, ["train", "-c", str(config), "--yes", "--stream-format", "chart"])
    assert result.exit_code == 0, result.output
    assert "* train reward per iteration   E eval reward (greedy)" in result.output and "iteration 3" in result.output
    grid = [line.split("|", 1)[1] for line in result.output.splitlines() if re.match(r"^ *(\d\.\d+)? \|", line)]
    assert len(grid) == 13  # the chart printed once, at the end (not a terminal)
    # evaluations at iterations 0 (before), 2 (validation) and 3 (after); training rewards at 1 to 3
    assert sum(row.count("E") for row in grid) == 3 and sum(row.count("*") for row in grid) >= 1
    columns = [column for row in grid for column, mark in enumerate(row) if mark == "E"]
    assert min(columns) == 0 and max(columns) == 63  # "before" at iteration 0, "after" at the last iteration


def test_zero_signal_groups_are_named_in_the_progress_line_and_the_summary(workdir: Path, tiny_model: Path, fake_export,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_CONSTANT", "1")  # every reward 0.5: no group can tell its rollouts apart
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir, tiny_model)), "--yes"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("iteration ")]
    assert len(lines) == 2
    for line in lines:
        assert "reward 0.500 +- 0.000  zero-signal 2/2 groups" in line and "no update (no group had signal)" in line
    run = RunFolder(workdir / "runs" / list_runs(workdir / "runs")[0]["id"])
    summary = (run.path / "summary.md").read_text()
    assert "Groups with no signal (all rewards equal, left out of the update): 4 of 4 - give partial credit" in summary
    assert run.status()["zero_signal_groups"] == 4 and run.status()["groups"] == 4


def test_failed_rollouts_are_shown_and_past_max_errors_the_run_fails_clearly(workdir: Path, tiny_model: Path,
                                                                             fake_export,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_FAIL_SEEDS", "5")  # the app answers 500 for seed 5; seed 0 works
    data = f'task_app = "{APP_FILE}"\ntrain_seeds = [0, 5]\ntask_retries = 0'
    result = runner.invoke(app, ["train", "-c", str(write_config(workdir, tiny_model, data=data)), "--yes"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("iteration ")]
    assert len(lines) == 2 and all("2 rollouts failed" in line and "zero-signal" in line for line in lines)
    assert "! rollout of seed 5 (train, iteration 1) failed:" in result.output and "HTTP 500" in result.output
    final = json.loads(result.output[result.output.rindex("\n{\n") + 1:])
    assert final["status"] == "completed"

    config = write_config(workdir, tiny_model, data=data, rl="eval_every = 0\nmax_errors = 1")
    failed = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert failed.exit_code == 1, failed.output
    assert "failed: RLAborted: 2 rollouts failed, more than max_errors = 1" in failed.output
    assert "Traceback" not in failed.output and '"status": "completed"' not in failed.output
    newest = max(list_runs(workdir / "runs"), key=lambda entry: entry["id"])
    status = RunFolder(workdir / "runs" / newest["id"]).status()
    assert status["status"] == "failed" and "max_errors = 1" in status["error"]
    assert "task app tiny_task_app.py stopped" in failed.output
    assert not any(alive(pid) for pid in pids_in(result.output + failed.output))


def test_a_refused_key_stops_before_the_model_loads(workdir: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-c", f"import uvicorn; from tests.finetune.tiny_task_app import build_app; "
               f"uvicorn.run(build_app('right-key'), host='127.0.0.1', port={port}, log_level='error')"]
    server = subprocess.Popen(command, cwd=Path(__file__).parents[2])
    try:
        import httpx

        deadline = time.time() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                assert time.time() < deadline
                time.sleep(0.1)
        monkeypatch.setenv("TASK_APP_API_KEY", "wrong-key")
        config = write_config(workdir, tiny_model, data=f'task_url = "http://127.0.0.1:{port}"')
        result = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert result.exit_code == 2
    assert "refused the API key (HTTP 401): the API key sent is not the app's" in result.output
    assert "TASK_APP_API_KEY" in result.output and "preparing" not in result.output
    assert "wrong-key" not in result.output and list_runs(workdir / "runs") == []


def test_an_interrupted_run_resumes_from_its_checkpoint(workdir: Path, tiny_model: Path, fake_export,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgym.core.events import RLIteration
    from promptgym.runs import stop as loop

    original = loop.StopRequest

    class StopAfterFirstIteration(original):  # what Ctrl-C does, at a point the test chooses
        def __init__(self) -> None:
            super().__init__()
            from promptgym.runs.events import EventWriter

            emit = EventWriter.emit

            def emit_and_stop(recorder_self, event):
                emit(recorder_self, event)
                if isinstance(event, RLIteration) and event.iteration == 1:
                    self.request("Ctrl-C")

            monkeypatch.setattr(EventWriter, "emit", emit_and_stop)

    monkeypatch.setattr(loop, "StopRequest", StopAfterFirstIteration)
    config = write_config(workdir, tiny_model, iterations=3)
    first = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert first.exit_code == 130, first.output
    assert "interrupted; checkpoint saved. Continue with: promptgym train --resume" in first.output
    run_id = list_runs(workdir / "runs")[0]["id"]
    assert RunFolder(workdir / "runs" / run_id).status()["status"] == "interrupted"
    monkeypatch.setattr(loop, "StopRequest", original)
    second = runner.invoke(app, ["train", "--resume", run_id, "--yes"])
    assert second.exit_code == 0, second.output
    assert f"resuming run {run_id} after iteration 1" in second.output and "resuming after iteration 1" in second.output
    assert "iteration 1/3" not in second.output and "iteration 3/3" in second.output
    assert not any(alive(pid) for pid in pids_in(first.output + second.output))


def test_sigterm_checkpoints_the_run_and_resume_continues_it(workdir: Path, tiny_model: Path, fake_export,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_DELAY_S", "0.3")  # each iteration takes a moment, so the signal lands mid-run
    config = write_config(workdir, tiny_model, iterations=4)
    run, output = sigterm_mid_run(config, workdir, "rl_iteration")
    status = run.status()
    done = status["iterations_done"]
    assert status["status"] == "interrupted" and 1 <= done < 4
    assert {"iteration": done, "path": f"checkpoints/step_{done:06d}"} in status["checkpoints"]
    assert pids_in(output) and not any(alive(pid) for pid in pids_in(output))  # the app stopped with the run

    monkeypatch.setenv("TINY_DELAY_S", "0")
    second = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert second.exit_code == 0, second.output
    assert f"resuming run {run.id} after iteration {done}" in second.output
    assert f"iteration {done}/4" not in second.output and f"iteration {done + 1}/4" in second.output
    history = (run.path / "history.csv").read_text().splitlines()[1:]
    assert [int(line.split(",")[0]) for line in history] == [1, 2, 3, 4]  # nothing trained twice, nothing skipped
    final = json.loads((run.path / "final_status.json").read_text())
    assert final["status"] == "completed" and [c["iteration"] for c in final["checkpoints"]][-1] == 4
    assert run.status()["status"] == "completed"


def test_a_prompt_learning_config_can_name_the_app_file_too(workdir: Path) -> None:
    config = workdir / "pl.toml"
    config.write_text(f"""
[job]
name = "tiny-pl"

[model]
name = "local/smollm2-135m-instruct"

[data]
task_app = "{APP_FILE}"
examples = 2

[optimizer]
name = "randomfewshot"

[training]
epochs = 1
batch_size = 2
evaluate_baseline = false
""")
    result = runner.invoke(app, ["train", "-c", str(config), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "task app tiny_task_app.py started on http://127.0.0.1:" in result.output
    assert "dry run: nothing started" in result.output and "task app tiny_task_app.py stopped" in result.output
    assert not any(alive(pid) for pid in pids_in(result.output))
