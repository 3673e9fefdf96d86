"""A chained fit (``Sequence([FineTune(...), RandomFewShot()])``) stopped in the middle of its SFT and run again
goes on inside the SFT stage, from the SFT's last checkpoint, through the library's ``fit(run_dir=...)`` and
``promptgym train --resume`` alike, and both leave the same run folder.

The tiny in-test model trains for real; its GGUF export is faked and the tuned model answers as a scripted LM
(as in test_finetune_optimizer.py). The stop comes at SFT step 3 of 6, one step after the step-2 checkpoint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import promptgym as pg
from promptgym.cli.main import app
from promptgym.optimizers.finetune import FineTune
from promptgym.optimizers.finetune import sft as finetune_module
from promptgym.modules.model_choice import set_model_factory
from promptgym.runs.folder import RunFolder, list_runs
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.cli.helpers import WORDS, Answer, Question, build_program, write_config

STOP_AT_STEP = 3  # SFT steps: 9 training rows / batch 3 = 3 a epoch, 2 epochs; save_steps 2
SFT = dict(n_epochs=2, batch_size=3, max_length=4096, lora={"r": 2, "target_modules": ["q_proj", "v_proj"]}, seed=0,
           sft={"save_steps": 2})
CLI_OWN = {"config.toml", "summary.md", "candidates.json", "plots"}
"""What the CLI adds to a run folder from its config (docs/runs.md): the rest is the same."""


def upper_case(request):
    return {"answer": last_user_json(request)["question"].upper()}


@pytest.fixture
def tuned_is_scripted():
    previous = set_model_factory(lambda base, model: ScriptedLanguageModel(respond=upper_case, model=model))
    yield
    set_model_factory(previous)


@pytest.fixture
def stop_mid_sft(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first SFT run stops (as on a second Ctrl-C: no checkpoint on the way out) after step 3; returns the
    sessions' SFT starting steps (``resume_from_step``, None for a fresh start)."""
    real, starts = finetune_module.run_sft_job, []

    def run_sft_job(settings, folder, seed, name, max_seconds, on_event):
        def watch(event):
            on_event(event)
            if event.kind == "sft_started":
                starts.append(event.resume_from_step)
            if len(starts) == 1 and event.kind == "sft_step" and event.step == STOP_AT_STEP:
                raise KeyboardInterrupt

        return real(settings, folder, seed, name, max_seconds, watch)

    monkeypatch.setattr(finetune_module, "run_sft_job", run_sft_job)
    return starts


def layout(folder: Path) -> set[str]:
    """The run folder's files; the SFT run's folder (named by a digest of its base model's path) and the tuned
    model's file (by a digest of the run folder's) made generic."""
    names = set()
    for path in folder.rglob("*"):
        if path.is_file():
            parts = ["sft-*" if part.startswith("sft-") else re.sub(r"-[0-9a-f]{6}-", "-*-", part)
                     for part in path.relative_to(folder).parts]
            names.add("/".join(parts))
    return names


def sft_started(run: RunFolder) -> list[dict]:
    return [event for event in run.events() if event["event"] == "sft_started"]


def data() -> tuple[list, list, list, list]:
    """write_config's data: 9 training examples, 3 validation."""
    x = [Question(question=word) for word in WORDS[:12]]
    y = [Answer(answer=word.upper()) for word in WORDS[:12]]
    return x[:9], y[:9], x[9:], y[9:]


async def chained_fit(tiny_model: Path, run_dir: Path) -> pg.Program:
    program = build_program()
    chain = pg.optimizers.Sequence([FineTune(base_model=str(tiny_model), **SFT),
                                    pg.optimizers.RandomFewShot(nb_max_examples=2)])
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=chain)
    x, y, x_val, y_val = data()
    await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=3, minibatch_size=3, verbose=0,
                      run_dir=run_dir)
    return program


async def test_a_chained_fit_stopped_mid_sft_goes_on_inside_the_sft_stage(tiny_model, tmp_path, fake_export,
                                                                          tuned_is_scripted, stop_mid_sft):
    run_dir = tmp_path / "runs" / "chain"
    with pytest.raises(KeyboardInterrupt):
        await chained_fit(tiny_model, run_dir)
    run = RunFolder(run_dir)
    assert run.status()["status"] == "interrupted"
    program = await chained_fit(tiny_model, run_dir)

    assert stop_mid_sft == [None, 2]  # the second session's SFT starts after step 2, not from step 0
    assert [event["resume_from_step"] for event in sft_started(run)] == [None, 2]
    steps = [event["step"] for event in run.events() if event["event"] == "sft_step"]
    assert steps == [1, 2, 3, 3, 4, 5, 6]  # step 3 ran again (it had no checkpoint), nothing before it
    resumed = next(event for event in run.events() if event["event"] == "resumed")
    assert resumed["checkpoint"] in ("checkpoints/last.json", "checkpoints/interrupted.json")
    assert run.status()["status"] == "completed" and run.status()["job_type"] == "prompt_learning"
    assert program.modules[-1].language_model.model.startswith("local/ft-")
    assert json.loads((run_dir / "best_program.json").read_text())["format"] == "promptgym.program"
    stages = [event["stage"] for event in run.events() if event["event"] == "stage_ended"]
    assert stages == ["1:FineTune", "2:RandomFewShot"]


def test_the_cli_resumes_the_same_chain_inside_its_sft_into_the_same_layout(tiny_model, tmp_path, fake_export,
                                                                          tuned_is_scripted, stop_mid_sft,
                                                                          monkeypatch):
    import asyncio

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTGYM_RUNS_DIR", str(tmp_path / "runs"))
    stages = f"""[[optimizer.stages]]
name = "finetune"
params = {{ base_model = "{tiny_model}", n_epochs = 2, batch_size = 3, max_length = 4096, seed = 0, lora = {{ r = 2, target_modules = ["q_proj", "v_proj"] }}, sft = {{ save_steps = 2 }} }}

[[optimizer.stages]]
name = "randomfewshot"
params = {{ nb_max_examples = 2 }}
"""
    config = write_config(tmp_path, epochs=1)
    text = config.read_text().replace('[optimizer]\nname = "randomfewshot"\nparams = { nb_max_examples = 2 }\n', stages)
    config.write_text(text.replace("[training]", "[training]\nevaluate_baseline = false"))
    runner = CliRunner()
    first = runner.invoke(app, ["train", "-c", str(config), "--yes"])
    assert first.exit_code == 130, first.output
    [status] = list_runs(tmp_path / "runs")
    cli_run = RunFolder(tmp_path / "runs" / status["id"])
    resumed = runner.invoke(app, ["train", "--resume", cli_run.id, "--yes"])
    assert resumed.exit_code == 0, resumed.output

    assert [event["resume_from_step"] for event in sft_started(cli_run)] == [None, 2]
    assert cli_run.status()["status"] == "completed"

    stop_mid_sft.clear()  # the library's run of the same chain, stopped at the same step
    library = tmp_path / "library"
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(chained_fit(tiny_model, library))
    asyncio.run(chained_fit(tiny_model, library))
    cli_files = {name for name in layout(cli_run.path) if name.split("/")[0] not in CLI_OWN}
    assert cli_files == layout(library)
    assert {name.split("/")[0] for name in layout(cli_run.path) - cli_files} == CLI_OWN
    assert {"run.json", "events.jsonl", "history.csv", "best_program.json", "checkpoints/last.json",
            "checkpoints/epoch_1.json"} <= cli_files
    assert any(name.startswith("finetune/stage-1/sft-*/checkpoints/step_000006/") for name in cli_files)


async def test_a_chain_stopped_in_its_second_stage_keeps_the_tuned_model_and_the_first_stage_row(
        tiny_model, tmp_path, fake_export, tuned_is_scripted, monkeypatch):
    real, calls = pg.optimizers.RandomFewShot.train_step, []

    async def stopped_at_its_second_step(self, ctx, batch):
        calls.append(batch)
        if len(calls) == 2:  # stage 2's first step is checkpointed; Ctrl-C in the second
            raise KeyboardInterrupt
        return await real(self, ctx, batch)

    monkeypatch.setattr(pg.optimizers.RandomFewShot, "train_step", stopped_at_its_second_step)
    run_dir = tmp_path / "chain"
    with pytest.raises(KeyboardInterrupt):
        await chained_fit(tiny_model, run_dir)
    program = await chained_fit(tiny_model, run_dir)

    run = RunFolder(run_dir)
    assert len(sft_started(run)) == 1  # the SFT ran in the first session only
    # the resumed program still runs on stage 1's tuned model (a later stage's candidates don't name it) ...
    assert program.modules[-1].language_model.model.startswith("local/ft-")
    # ... and history.csv keeps stage 1's row (a chain's epochs count from 0 again in every stage)
    rows = (run_dir / "history.csv").read_text().splitlines()[1:]
    assert [row.split(",")[1] for row in rows] == ["1:FineTune", "2:RandomFewShot"]
