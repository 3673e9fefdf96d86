"""The task-app loop on 127.0.0.1: server helper, client (auth, retries, failures), prompt learning via the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.core.local_server import free_port
from promptgym.runs.folder import RunFolder, list_runs
from promptgym.taskapp import (
    PolicyModule, RolloutFailed, RolloutRequest, RolloutResponse, TaskAppClient, TaskAppError, TaskInfo,
    TrajectoryStep, create_task_app,
)
from promptgym.taskapp.protocol import Policy
from tests.support import served_in_thread

KEY = "task-app-test-key"
BROKEN_SEED = 7
calls: list[RolloutRequest] = []


def rollout(request: RolloutRequest) -> RolloutResponse:
    """Right on seeds divisible by 3, or on every seed once the prompt has a demonstration."""
    calls.append(request)
    if request.seed == BROKEN_SEED:
        raise RuntimeError("environment crashed")
    state = request.policy.variables.get("policy", {})
    solved = request.seed % 3 == 0 or bool(state.get("examples"))
    answer = str(request.seed * 2) if solved else "?"
    return RolloutResponse(seed=request.seed, reward=float(solved), feedback="" if solved else "wrong answer",
                           trajectory=[TrajectoryStep(module="policy", inputs={"n": request.seed},
                                                      outputs={"double": answer})])


INFO = TaskInfo(name="doubling", description="double a number", modules=[PolicyModule(name="policy", instructions="Double it.")],
                splits={"train": list(range(9)), "validation": [20, 21, 22], "test": [30, 31, 32, 33]})



@pytest.fixture
def task_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TASK_APP_API_KEY", KEY)
    calls.clear()
    with served_in_thread(create_task_app(INFO, rollout)) as url:
        yield url


async def test_client_health_info_auth_and_failed_rollout(task_app: str) -> None:
    client = TaskAppClient(task_app, api_key=KEY, retries=1, backoff_s=0.01)
    assert (await client.health()).status == "ok"
    assert (await client.check()).splits["validation"] == [20, 21, 22]
    good = await client.rollout(RolloutRequest(seed=3, policy=Policy(model="m")))
    assert good.reward == 1.0 and good.trajectory[0].outputs == {"double": "6"}
    with pytest.raises(TaskAppError, match="HTTP 401"):
        await TaskAppClient(task_app, api_key="wrong").task_info()
    before = len(calls)
    with pytest.raises(RolloutFailed, match=f"seed={BROKEN_SEED}.*HTTP 500"):
        await client.rollout(RolloutRequest(seed=BROKEN_SEED, policy=Policy(model="m")))
    assert len(calls) - before == 2  # retried once


async def test_task_app_down_is_a_clear_error() -> None:
    client = TaskAppClient(f"http://127.0.0.1:{free_port()}", retries=1, backoff_s=0.01, timeout=2)
    with pytest.raises(TaskAppError, match="not reachable; is it running"):
        await client.check()


def write_config(folder: Path, url: str) -> Path:
    config = folder / "taskapp.toml"
    config.write_text(f"""
[job]
name = "doubling"
[model]
name = "local/qwen2.5-coder-0.5b-instruct"
[data]
task_url = "{url}"
task_retries = 0
[optimizer]
name = "randomfewshot"
params = {{ nb_max_examples = 1 }}
[training]
epochs = 2
batch_size = 3
minibatch_size = 3
""")
    return config


def test_prompt_learning_against_the_task_app(task_app: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["train", "-c", str(write_config(tmp_path, task_app)), "--yes"])
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    run = RunFolder(tmp_path / "runs" / list_runs(tmp_path / "runs")[0]["id"])
    status = run.status()
    assert status["status"] == "completed"
    assert status["baseline"]["split"] == "test" and status["final"]["reward"] > status["baseline"]["reward"]
    failed = [e for e in run.events() if e["event"] == "example_failed"]
    assert failed and failed[0]["index"] == BROKEN_SEED and "HTTP 500" in failed[0]["error"]
    best = (run.path / "best_program.json").read_text()
    assert '"examples": [' in best and KEY not in best
    assert any(call.policy.variables["policy"]["examples"] for call in calls)  # candidates reached the app
    assert (run.path / "summary.md").is_file()


def test_cli_reports_task_app_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["train", "-c", str(write_config(tmp_path, f"http://127.0.0.1:{free_port()}")), "--yes"])
    assert result.exit_code == 2
    assert "data.task_url:" in result.output and "not reachable" in result.output
    assert not (tmp_path / "runs").exists()
