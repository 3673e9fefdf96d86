"""``FineTune(n_epochs="auto", max_train_seconds=...)`` in fit(): held-out rows, the plan, the early stop and the
best checkpoint reported in ``history.comparisons``; the error without a budget; the TOML key.

The tuned model runs as a scripted LM (its GGUF export is faked); a fake clock and scripted validation losses
make the plan and the stop exact (tests/finetune/budget_clock.py).
"""

from __future__ import annotations

import json

import pytest

import promptgym as pg
from promptgym.cli.build import build_optimizer
from promptgym.cli.config import ConfigError, load_config
from promptgym.modules.model_choice import set_model_factory
from promptgym.optimizers.finetune import FineTune, FineTuneError
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.finetune.budget_clock import install_clock, scripted_losses
from tests.support import EventRecorder, functional_program, labelled

WORDS = ("paris", "rome", "oslo", "lima", "bern", "kiev", "riga", "doha", "baku", "suva")


@pytest.fixture
def tuned_is_right():
    """Every model built from a string (the tuned one) answers the question in capitals."""
    previous = set_model_factory(lambda base, model: ScriptedLanguageModel(
        respond=lambda request: {"answer": last_user_json(request)["question"].upper()}, model=model))
    yield
    set_model_factory(previous)


async def test_auto_fills_the_budget_stops_early_and_says_so_in_the_comparison(tiny_model, tmp_path, fake_export,
                                                                               tuned_is_right, monkeypatch):
    clock = install_clock(monkeypatch, step_s=1.0, eval_s=1.0)
    scripted_losses(monkeypatch, clock, [5.0, 4.0, 3.0, 3.5, 3.6, 3.7, 3.8])
    program = await functional_program(ScriptedLanguageModel(respond=lambda request: {"answer": "?"}))
    optimizer = FineTune(base_model=str(tiny_model), output_dir=str(tmp_path / "ft"), n_epochs="auto",
                         max_train_seconds=30, batch_size=2, max_length=4096, seed=0,
                         lora={"r": 2, "target_modules": ["q_proj", "v_proj"]})
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    history = await program.fit(*labelled(*WORDS), validation_data=labelled("apia", "male"), epochs=1,
                                batch_size=10, verbose=0)

    folder = next((tmp_path / "ft").glob("sft-*"))
    held = [json.loads(line) for line in (folder / "validation.jsonl").read_text().splitlines()]
    trained = (folder / "train.jsonl").read_text().splitlines()
    assert len(held) == 1 and len(trained) == 9  # a tenth of the 10 rows held out, drawn with the seed
    [comparison] = history.comparisons
    [training] = comparison["training"]
    # 9 rows at batch 2: 5 steps an epoch; after 3 timed steps the plan fills 30 s with 20, evaluated every 3;
    # the loss is lowest at step 6 and rises twice: stopped at step 12, the step-6 adapter exported
    assert training["plan"]["steps"] == 20 and training["plan"]["eval_steps"] == 3
    assert {key: training[key] for key in ("rows", "validation_rows", "n_epochs", "steps", "epochs", "exported_step",
                                           "best_validation_loss")} == {
        "rows": 9, "validation_rows": 1, "n_epochs": "auto", "steps": 12, "epochs": 2.4, "exported_step": 6,
        "best_validation_loss": 3.0}
    assert training["validation_losses"] == [[0, 5.0], [3, 4.0], [6, 3.0], [9, 3.5], [12, 3.6]]
    assert training["stopped"].startswith("early stop: validation loss 3.6 at step 12, not below the best 3 (step 6)")
    assert training["seconds"] > 0 and training["model"] == program.modules[-1].language_model.model
    assert comparison["accepted"] and comparison["verdict"].startswith("kept: val 1.000")
    assert fake_export[0].name == "step_000006"
    assert optimizer.get_extra_state()["training"][next(iter(optimizer.training))] == training


async def test_a_dropped_tuned_model_says_why_in_its_comparison(tiny_model, tmp_path, fake_export, monkeypatch):
    previous = set_model_factory(lambda base, model: ScriptedLanguageModel(respond=lambda r: {"answer": "?"},
                                                                           model=model))
    try:
        clock = install_clock(monkeypatch, step_s=1.0, eval_s=1.0)
        scripted_losses(monkeypatch, clock, [5.0, 6.0, 7.0])
        program = await functional_program(ScriptedLanguageModel(
            respond=lambda request: {"answer": last_user_json(request)["question"].upper()}))
        program.compile(reward=pg.rewards.ExactMatch(), optimizer=FineTune(
            base_model=str(tiny_model), output_dir=str(tmp_path / "ft"), n_epochs="auto", max_train_seconds=30,
            batch_size=2, max_length=4096, seed=0, lora={"r": 2, "target_modules": ["q_proj"]}))
        history = await program.fit(*labelled(*WORDS), validation_data=labelled("apia", "male"), epochs=1,
                                    batch_size=10, verbose=0)
    finally:
        set_model_factory(previous)
    [comparison] = history.comparisons
    assert not comparison["accepted"] and comparison["verdict"].startswith("dropped (not ahead of the start): val 0.000")
    assert comparison["training"][0]["exported_step"] == 0  # the loss never fell: the untrained adapter
    assert program.modules[-1].language_model.model == "scripted/test"


def test_auto_without_a_budget_is_an_error_naming_both_arguments():
    with pytest.raises(FineTuneError, match=r"n_epochs='auto' plans the epochs that fill max_train_seconds, but "
                                            r"max_train_seconds is not set"):
        FineTune(n_epochs="auto")
    with pytest.raises(FineTuneError, match=r"n_epochs must be a whole number >= 1 or 'auto', got 'three'"):
        FineTune(n_epochs="three", max_train_seconds=60)
    again = pg.optimizers.get({"class_name": "FineTune", "config": FineTune(n_epochs="auto", max_train_seconds=90)
                               .get_config()})
    assert again.n_epochs == "auto" and again.max_train_seconds == 90


def test_an_sft_option_that_auto_plans_itself_fails_at_construction():
    with pytest.raises(FineTuneError, match=r"(?s)bad SFT setting.*n_epochs = 'auto' plans its own steps and "
                                            r"evaluations: drop max_steps and eval_steps"):
        FineTune(n_epochs="auto", max_train_seconds=60, sft={"eval_steps": 5})
    assert FineTune(n_epochs=2, sft={"eval_steps": 5}).settings_for("m", "t").n_epochs == 2
    settings = FineTune(n_epochs="auto", max_train_seconds=60).settings_for("m", "t", "v")
    assert (settings.n_epochs, settings.time_budget.seconds) == ("auto", 60)


def test_the_toml_key_n_epochs_auto(tmp_path):
    config = tmp_path / "train.toml"
    data = '[program.generator]\n\n[data]\ndataset = "arithmetic"\n\n'
    config.write_text(data + '[[optimizer.stages]]\nname = "knnfewshot"\n\n[[optimizer.stages]]\nname = "finetune"\n'
                      'params = { n_epochs = "auto", max_train_seconds = 1200 }\n')
    chain = build_optimizer(load_config([config]))
    assert chain.stages[1].n_epochs == "auto" and chain.stages[1].max_train_seconds == 1200
    config.write_text(data + '[optimizer]\nname = "finetune"\nparams = { n_epochs = "auto" }\n')
    with pytest.raises(ConfigError, match=r"optimizer: FineTune: n_epochs='auto' plans the epochs that fill "
                                          r"max_train_seconds, but max_train_seconds is not set.*"
                                          r"\(optimizer.params: n_epochs='auto'\)"):
        build_optimizer(load_config([config]))


async def test_a_killed_auto_fit_resumes_its_sft_with_the_same_plan(tiny_model, tmp_path, fake_export, tuned_is_right,
                                                                    monkeypatch):
    from promptgym.optimizers.finetune import sft as module

    clock = install_clock(monkeypatch, step_s=1.0, eval_s=1.0)
    scripted_losses(monkeypatch, clock, (5.0 - 0.01 * i for i in range(100)))
    real, calls = module.run_sft_job, []

    def killed_after_the_plan(settings, folder, seed, name, max_seconds, on_event):
        calls.append(folder)
        if len(calls) > 1:
            return real(settings, folder, seed, name, max_seconds, on_event)

        def stop_there(event):
            on_event(event)
            if event.kind == "checkpoint_saved" and event["reason"] == "plan":
                raise KeyboardInterrupt

        return real(settings, folder, seed, name, max_seconds, stop_there)

    monkeypatch.setattr(module, "run_sft_job", killed_after_the_plan)

    async def fit(recorder=None):
        program = await functional_program(ScriptedLanguageModel(respond=lambda request: {"answer": "?"}))
        program.compile(reward=pg.rewards.ExactMatch(), optimizer=FineTune(
            base_model=str(tiny_model), output_dir=str(tmp_path / "ft"), n_epochs="auto", max_train_seconds=30,
            batch_size=2, max_length=4096, seed=0, lora={"r": 2, "target_modules": ["q_proj"]}))
        return await program.fit(*labelled(*WORDS), validation_data=labelled("apia"), epochs=1, batch_size=10,
                                 verbose=0, callbacks=[recorder] if recorder else [])

    with pytest.raises(KeyboardInterrupt):
        await fit()
    recorder = EventRecorder()
    history = await fit(recorder)
    [started] = recorder.of("sft_started")
    assert started["resume_from_step"] == 3 and started["steps"] == 20 and recorder.of("sft_planned") == []
    assert history.comparisons[0]["training"][0]["plan"]["steps"] == 20
