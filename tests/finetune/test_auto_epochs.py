"""``n_epochs="auto"`` on the SFT engine: the plan fills the budget, the early stop, the best checkpoint, resume.

A fake clock stands in for time (each step and each evaluation "takes" a set number of seconds) and
the validation losses are scripted, so the plan and the stop are exact; the steps themselves train the
tiny in-test model for real.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from promptgym.finetune import SFTJob, SFTSettings
from promptgym.finetune.auto_epochs import AutoBudget, BudgetPlan, plan_budget
from promptgym.finetune.checkpoint import checkpoint_name, read_adapter
from promptgym.finetune.sft_run import run_sft
from tests.finetune.budget_clock import FakeClock, install_clock, scripted_losses
from tests.finetune.tiny_model import capital_rows, write_rows


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return install_clock(monkeypatch, step_s=1.0, eval_s=1.0)


def settings(tiny_model: Path, tmp_path: Path, rows: int = 16) -> SFTSettings:
    train = write_rows(tmp_path / "train.jsonl", capital_rows(rows))
    validation = write_rows(tmp_path / "validation.jsonl", capital_rows(4))
    return SFTSettings(base_model=str(tiny_model), train_file=str(train), validation_file=str(validation),
                       batch_size=2, max_length=256, lora={"r": 2, "target_modules": ["q_proj", "v_proj"]}, seed=0,
                       save_steps=1000, summary_samples=0)


def events_of(kind: str, events: list) -> list:
    return [event for event in events if event.kind == kind]


def test_the_plan_fills_the_budget_from_the_first_steps(tiny_model, tmp_path, fake_export, clock, monkeypatch):
    scripted_losses(monkeypatch, clock, (10.0 - 0.1 * i for i in itertools.count()))  # always falling: no early stop
    events: list = []
    job = SFTJob.prepare(settings(tiny_model, tmp_path), name="auto")
    result = run_sft(job, tmp_path / "run", on_event=events.append, budget=AutoBudget(seconds=30))

    # before: 1 s of evaluation; then 3 steps of 1 s timed; 7 evaluations (1 s each, at most a quarter of the
    # budget) and 1 s steps fill what is left of 30 s less the 5% margin: 17 more steps
    expected = plan_budget(AutoBudget(30), used_s=4.0, step_s=1.0, eval_s=1.0, steps_done=3, steps_per_epoch=8)
    assert (expected.steps, expected.eval_steps) == (20, 3)
    [planned] = events_of("sft_planned", events)
    assert planned["steps"] == 20 and planned["eval_steps"] == 3 and planned["epochs"] == 2.5
    assert result.steps == 20 and result.epochs == 2.5 and result.plan == expected.as_dict()
    assert result.stop_reason == "the planned 20 steps done"
    # the last epoch ends partway: half of a third pass, on rows drawn from that pass's own shuffle
    steps = events_of("sft_step", events)
    assert len(steps) == 20 and steps[-1]["epoch"] == pytest.approx(2.5) and steps[-1]["total_steps"] == 20
    assert [step for step, _ in result.eval_losses] == [0, 3, 6, 9, 12, 15, 18, 20]
    assert 0.9 * 30 <= clock.now <= 30  # filled, not overrun: 1 + 20 + 7 * 1 = 28 s
    assert steps[-1]["lr"] > 0 and steps[3]["lr"] > steps[-1]["lr"]  # the rate decays to the planned end


def test_a_rising_validation_loss_stops_early_and_the_best_checkpoint_is_exported(tiny_model, tmp_path, fake_export,
                                                                                 clock, monkeypatch):
    # before, then every 3 steps: falls to its lowest at step 6, then rises twice: stop after step 12
    scripted_losses(monkeypatch, clock, [5.0, 4.0, 3.0, 3.5, 3.6, 3.7, 3.8, 3.9, 4.0])
    events: list = []
    job = SFTJob.prepare(settings(tiny_model, tmp_path), name="auto")
    result = run_sft(job, tmp_path / "run", on_event=events.append, budget=AutoBudget(seconds=30))

    assert result.steps == 12 and result.eval_losses == [[0, 5.0], [3, 4.0], [6, 3.0], [9, 3.5], [12, 3.6]]
    assert result.stop_reason == ("early stop: validation loss 3.6 at step 12, not below the best 3 (step 6) "
                                  "for 2 evaluations")
    assert result.exported_step == 6 and result.best_eval_loss == 3.0
    assert result.final_eval_loss == 3.6  # the last weights' loss, measured once (no second evaluation)
    [exported] = fake_export
    assert exported.name == checkpoint_name(6)
    best, last = read_adapter(exported), read_adapter(tmp_path / "run" / "checkpoints" / checkpoint_name(12))
    assert any(not best[name].equal(last[name]) for name in best)  # a different adapter from the last one
    status = json.loads((tmp_path / "run" / "run.json").read_text())
    assert status["exported_step"] == 6 and status["stop_reason"].startswith("early stop")
    assert "exported the adapter of step 6 (the best validation loss, 3.0000)" in \
        (tmp_path / "run" / "summary.md").read_text()


def test_a_validation_loss_that_never_falls_exports_the_untrained_adapter(tiny_model, tmp_path, fake_export, clock,
                                                                          monkeypatch):
    scripted_losses(monkeypatch, clock, [2.0, 2.5, 2.6])
    job = SFTJob.prepare(settings(tiny_model, tmp_path), name="auto")
    result = run_sft(job, tmp_path / "run", budget=AutoBudget(seconds=30))
    assert result.steps == 6 and result.exported_step == 0 and fake_export[0].name == checkpoint_name(0)


def test_a_killed_auto_run_resumes_with_the_plan_it_saved(tiny_model, tmp_path, fake_export, clock, monkeypatch):
    scripted_losses(monkeypatch, clock, (10.0 - 0.1 * i for i in itertools.count()))
    first: list = []

    def killed_after_the_plan(event):
        first.append(event)
        if event.kind == "checkpoint_saved" and event["reason"] == "plan":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sft(SFTJob.prepare(settings(tiny_model, tmp_path), name="auto"), tmp_path / "run",
                on_event=killed_after_the_plan, budget=AutoBudget(seconds=30))
    [planned] = events_of("sft_planned", first)

    clock.step_s = 5.0  # the machine got slower: a fresh plan would hold far fewer steps; the saved one stays
    again: list = []
    result = run_sft(SFTJob.prepare(settings(tiny_model, tmp_path), name="auto"), tmp_path / "run",
                     on_event=again.append, resume=True, budget=AutoBudget(seconds=30))
    assert events_of("sft_planned", again) == []
    [started] = events_of("sft_started", again)
    assert started["resume_from_step"] == 3 and started["steps"] == planned["steps"] == 20
    assert BudgetPlan.from_dict(result.plan).steps == 20
    # the budget counts both sessions: 5 s before the kill, then 5 s a step (and evaluations) until 30 s are used
    assert result.stop_reason.startswith("time budget: max_train_seconds=30 used up at step ")
    assert 3 < result.steps < 20 and clock.now >= 30
