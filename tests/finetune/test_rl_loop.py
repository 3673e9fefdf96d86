"""GRPO against the tiny task app on 127.0.0.1 with the tiny model: the loop, failures, auth, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from promptgym.core.events import CheckpointSaved, Event, RLEvaluation, RLIteration, RLStarted, RolloutFailedEvent
from promptgym.finetune.checkpoint import last_checkpoint, read_adapter
from promptgym.runs.stop import StopRequest, TrainingInterrupted
from promptgym.finetune.rl import RLJob, RLSettings
from promptgym.finetune.rl.grpo import RLAborted
from promptgym.finetune.rl.policy_server import PolicyServer
from promptgym.finetune.settings import LoraSettings
from promptgym.lm.finetuned_models import finetuned_model
from promptgym.taskapp import TaskAppEnvironment, TaskAppError
from tests.finetune import tiny_task_app
from tests.support import served_in_thread

KEY = "tiny-app-key"
FAULTS = ("TINY_FAIL_SEEDS", "TINY_SLOW_SEEDS", "TINY_BAD_JSON_SEEDS", "TINY_CONSTANT", "TINY_DELAY_S")


@pytest.fixture
def app_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TASK_APP_API_KEY", KEY)
    for name in FAULTS:
        monkeypatch.delenv(name, raising=False)
    with served_in_thread(tiny_task_app.build_app(KEY)) as url:
        yield url


def settings(tiny_model: Path, **changes: Any) -> RLSettings:
    values = dict(base_model=str(tiny_model), iterations=3, batch_size=2, group_size=4, max_new_tokens=6,
                  learning_rate=0.05, eval_every=2, save_steps=2, lora=LoraSettings(r=4, alpha=8, dropout=0.0))
    return RLSettings(**{**values, **changes})


async def run(tiny_model: Path, url: str, folder: Path, events: list[Event], stop: StopRequest | None = None,
              resume: bool = False, timeout: float = 30.0, retries: int = 1, **changes: Any) -> Any:
    environment = await TaskAppEnvironment.connect(url, api_key=KEY, concurrency=64, timeout=timeout, retries=retries,
                                                   backoff_s=0.01)
    job = RLJob.prepare(settings(tiny_model, **changes), name="tiny")
    return await job.run(environment, folder, on_event=events.append, resume=resume, stop=stop)


def of(events: list[Event], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


async def test_a_run_trains_on_the_tokens_the_server_sampled(tiny_model: Path, app_url: str, tmp_path: Path,
                                                              fake_export, monkeypatch: pytest.MonkeyPatch) -> None:
    import promptgym.finetune.rl.grpo as grpo

    served, updates = [], []
    original_close, original_update = PolicyServer.close_rollout, grpo.grpo_update

    def close_rollout(self, rollout):
        completions = original_close(self, rollout)
        served.extend(completions)
        return completions

    def grpo_update(model, optimizer, scheduler, rows, settings, pad_id):
        measured = original_update(model, optimizer, scheduler, rows, settings, pad_id)
        updates.append((list(rows), measured))
        return measured

    monkeypatch.setattr(PolicyServer, "close_rollout", close_rollout)
    monkeypatch.setattr(grpo, "grpo_update", grpo_update)
    events: list[Event] = []
    result = await run(tiny_model, app_url, tmp_path / "run", events)

    status = result.final_status()
    assert set(status) == {"status", "final_reward", "eval_reward_before", "eval_reward_after", "model_id", "checkpoints"}
    assert status["status"] == "completed" and status["model_id"].startswith("local/ft-tiny-")
    assert status["checkpoints"] == [{"iteration": 2, "path": "checkpoints/step_000002"},
                                     {"iteration": 3, "path": "checkpoints/step_000003"}]
    assert isinstance(status["eval_reward_before"], float) and isinstance(status["eval_reward_after"], float)
    iterations = of(events, RLIteration)
    assert [e.iteration for e in iterations] == [1, 2, 3]
    assert all(e.groups == 2 and e.failed_rollouts == 0 and e.completion_tokens > 0 for e in iterations)
    assert [(e.label, e.split, e.size, e.iteration) for e in of(events, RLEvaluation)] == [
        ("before", "test", 3, 0), ("during", "validation", 2, 2), ("after", "test", 3, 3)]
    assert sum(e.updated for e in iterations) == len(updates) >= 1
    # exactly what was served is trained on, with the log-probabilities recorded when it was sampled
    served_keys = {(tuple(c.prompt_ids), tuple(c.completion_ids), tuple(c.logprobs)) for c in served}
    for rows, measured in updates:
        assert {(tuple(r.prompt_ids), tuple(r.completion_ids), tuple(r.logprobs)) for r in rows} <= served_keys
        assert measured["logprob_mismatch"] < 1e-3 and measured["trained_tokens"] == sum(len(r.completion_ids) for r in rows)
    assert "tiny" in {e.environment for e in of(events, RLStarted)}
    rows = (tmp_path / "run" / "history.csv").read_text().splitlines()
    assert rows[0].startswith("iteration,mean_reward,reward_spread,zero_signal_groups") and len(rows) == 4
    entry = finetuned_model(status["model_id"].removeprefix("local/"))
    assert entry is not None and entry.method == "rl" and entry.details["iterations"] == 3
    for name in ("final_status.json", "summary.md", "plots/reward.png", "run.json"):
        assert (tmp_path / "run" / name).is_file(), name
    assert "Groups with no signal" in (tmp_path / "run" / "summary.md").read_text()


async def test_groups_whose_rewards_are_all_equal_are_counted_and_never_trained_on(
        tiny_model: Path, app_url: str, tmp_path: Path, fake_export, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_CONSTANT", "1")
    events: list[Event] = []
    await run(tiny_model, app_url, tmp_path / "run", events, iterations=2, eval_every=0)
    iterations = of(events, RLIteration)
    assert [(e.zero_signal_groups, e.groups, e.updated, e.loss, e.mean_reward) for e in iterations] == [
        (2, 2, False, None, 0.5), (2, 2, False, None, 0.5)]
    adapter = read_adapter(last_checkpoint(tmp_path / "run" / "checkpoints"))
    assert all(float(tensor.abs().max()) == 0.0 for name, tensor in adapter.items() if "lora_B" in name)


async def test_failed_rollouts_are_logged_left_out_and_never_fatal(tiny_model: Path, app_url: str, tmp_path: Path,
                                                                   fake_export, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_FAIL_SEEDS", "0,1")
    monkeypatch.setenv("TINY_SLOW_SEEDS", "2")
    monkeypatch.setenv("TINY_BAD_JSON_SEEDS", "3")
    events: list[Event] = []
    result = await run(tiny_model, app_url, tmp_path / "run", events, iterations=2, batch_size=4, group_size=2,
                       eval_every=0, timeout=2.5, retries=0)  # the slow seed answers after 5 s
    failed = of(events, RolloutFailedEvent)
    assert sorted({e.seed for e in failed}) == [0, 1, 2, 3] and len(failed) == 8  # each bad seed's 2 rollouts
    errors = {e.seed: e.error for e in failed}
    assert "HTTP 500" in errors[0] and "Timeout" in errors[2] and "not JSON" in errors[3]
    assert "no answer within 2.5 s" in errors[2] and "data.task_timeout" in errors[2]  # which setting to raise
    assert sum(e.failed_rollouts for e in of(events, RLIteration)) == 8
    assert result.status == "completed" and result.failed_rollouts == 8


async def test_max_errors_and_an_iteration_that_fails_whole_stop_the_run(tiny_model: Path, app_url: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_FAIL_SEEDS", "0,1,2,3,4,5,6,7")
    with pytest.raises(RLAborted, match="every rollout of iteration 1 failed"):
        await run(tiny_model, app_url, tmp_path / "a", [], eval_every=0)
    monkeypatch.setenv("TINY_FAIL_SEEDS", "0,1,2,3")
    with pytest.raises(RLAborted, match="more than max_errors = 1"):
        await run(tiny_model, app_url, tmp_path / "b", [], iterations=4, eval_every=0, max_errors=1)


async def test_a_wrong_key_is_refused_before_anything_runs(app_url: str) -> None:
    with pytest.raises(TaskAppError, match="refused the API key \\(HTTP 401\\): the API key sent is not the app's"):
        await TaskAppEnvironment.connect(app_url, api_key="wrong")
    with pytest.raises(TaskAppError, match="refused the API key \\(HTTP 401\\): no API key was sent"):
        await TaskAppEnvironment.connect(app_url)


async def test_a_stopped_run_resumes_after_its_checkpoint(tiny_model: Path, app_url: str, tmp_path: Path,
                                                         fake_export) -> None:
    from promptgym.finetune.lora import adapter_state

    folder, stop, first = tmp_path / "run", StopRequest(), []

    def stop_after_two(event: Event) -> None:
        first.append(event)
        if isinstance(event, RLIteration) and event.iteration == 2:
            stop.request("test")

    with pytest.raises(TrainingInterrupted):
        environment = await TaskAppEnvironment.connect(app_url, api_key=KEY)
        await RLJob.prepare(settings(tiny_model, iterations=4), name="tiny").run(environment, folder,
                                                                                  on_event=stop_after_two, stop=stop)
    saved = read_adapter(last_checkpoint(folder / "checkpoints"))
    assert [(e.step, e.reason) for e in of(first, CheckpointSaved)] == [(2, "stop (test)")]
    job = RLJob.prepare(settings(tiny_model, iterations=4), name="tiny")
    second: list[Event] = []

    def check_restored(event: Event) -> None:
        second.append(event)
        if isinstance(event, RLStarted):
            restored = adapter_state(job.model)
            assert all(float((restored[name] - tensor).abs().max()) == 0.0 for name, tensor in saved.items())

    environment = await TaskAppEnvironment.connect(app_url, api_key=KEY)
    result = await job.run(environment, folder, on_event=check_restored, resume=True)
    assert of(second, RLStarted)[0].resume_from_iteration == 2
    assert [e.iteration for e in of(second, RLIteration)] == [3, 4]
    assert [e.label for e in of(second, RLEvaluation)] == ["after"]  # "before" ran in the first session
    assert result.iterations == 4 and [c["iteration"] for c in result.checkpoints] == [2, 4]
    history = (folder / "history.csv").read_text().splitlines()[1:]
    assert [int(line.split(",")[0]) for line in history] == [1, 2, 3, 4]
