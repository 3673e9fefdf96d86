"""FineTune in fit(): rows in the program's own format, LoRA SFT of a tiny in-test model, the tuned model as a
candidate validated against the start, save/load, the time budget, and the errors a user can hit.

The tiny model's GGUF export is faked (``fake_export``), so the tuned model runs as a scripted one
(``set_model_factory``): these tests check the wiring and the training, not what the model learns.
"""

from __future__ import annotations

import itertools
import json

import pytest

import promptgym as pg
from promptgym.optimizers.finetune import FineTune, FineTuneError
from promptgym.modules.model_choice import set_model_factory
from promptgym.optimizers.selection import OneAnswerWarning
from promptgym.testing import ScriptedLanguageModel, last_user_json
from promptgym.traces import TraceStore
from tests.support import Answer, EventRecorder, Question, functional_program, labelled


def answers(answer):
    return lambda request: {"answer": answer}


def upper_case(request):
    return {"answer": last_user_json(request)["question"].upper()}


def always(answer):
    return ScriptedLanguageModel(respond=answers(answer))


def upper():
    return ScriptedLanguageModel(respond=upper_case)


@pytest.fixture
def tuned_answers():
    """The tuned model runs as a scripted LM answering with ``tuned_answers[0]``; records the model strings built."""
    holder: list = [upper_case]
    built: list[str] = []

    def factory(base, model):
        built.append(model)
        return ScriptedLanguageModel(respond=holder[0], model=model)

    previous = set_model_factory(factory)
    yield holder, built
    set_model_factory(previous)


def finetune(tiny_model, tmp_path, **options):
    defaults = dict(base_model=str(tiny_model), output_dir=str(tmp_path / "ft"), n_epochs=1, batch_size=2,
                    max_length=4096, lora={"r": 2, "target_modules": ["q_proj", "v_proj"]}, seed=0)
    return FineTune(**{**defaults, **options})


async def test_labels_train_a_model_that_replaces_the_start_when_it_wins(tiny_model, tmp_path, fake_export,
                                                                         tuned_answers):
    holder, built = tuned_answers
    program = await functional_program(always("?"))
    optimizer = finetune(tiny_model, tmp_path)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = labelled("paris", "rome", "oslo", "lima")
    x_val, y_val = labelled("bern", "riga", "doha")
    recorder = EventRecorder()
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=4, verbose=0,
                                callbacks=[recorder])

    model = program.modules[-1].language_model.model
    assert model.startswith("local/ft-finetune-") and built == [model]
    rows = [json.loads(line) for line in next((tmp_path / "ft").glob("sft-*/train.jsonl")).read_text().splitlines()]
    generator = program.modules[-1]
    assert len(rows) == 4
    assert rows[0]["messages"][:-1] == generator.messages({"question": "paris"}, [],
                                                          input_schema=x[0].get_schema())
    assert rows[0]["messages"][-1] == {"role": "assistant", "content": json.dumps({"answer": "PARIS"})}
    assert optimizer.sft_steps == 2 and optimizer.rows == {generator.name: 4}
    assert {"sft_started", "sft_step", "model_registered"} <= set([e.kind for e in recorder.events])
    [comparison] = history.comparisons
    assert comparison["accepted"] and comparison["candidate_score"]["mean"] == 1.0
    assert comparison["incumbent_score"]["mean"] == 0.0
    assert history.history["val_reward"] == [1.0]
    assert len(fake_export) == 1  # one SFT job, exported and registered once

    program.save(tmp_path / "tuned.json")
    loaded = pg.Program.load(tmp_path / "tuned.json")
    assert loaded.modules[-1].language_model.model == model
    assert isinstance(loaded.training_setup.optimizer, FineTune)
    assert loaded.training_setup.optimizer.tuned == optimizer.tuned  # a resumed fit does not train again


async def test_a_tuned_model_worse_on_validation_leaves_the_program_on_its_model(tiny_model, tmp_path, fake_export,
                                                                                tuned_answers):
    holder, _ = tuned_answers
    holder[0] = answers("?")
    program = await functional_program(upper())
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path))
    x, y = labelled("paris", "rome")
    x_val, y_val = labelled("bern", "riga")
    recorder = EventRecorder()
    history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=2, verbose=0,
                                callbacks=[recorder])
    assert program.modules[-1].language_model.model == "scripted/test"
    assert [c["accepted"] for c in history.comparisons] == [False]
    rejected = [e for e in recorder.events if e.kind == "candidate_rejected"]
    assert "worse than the start on validation" in rejected[0]["reason"]


async def test_a_tuned_model_that_learned_the_most_common_label_wins_with_a_warning(tiny_model, tmp_path,
                                                                                      fake_export, tuned_answers):
    holder, _ = tuned_answers
    holder[0] = answers("ROME")
    program = await functional_program(always("?"))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path))
    x, y = labelled("paris", "rome")
    x_val, y_val = labelled(*["rome"] * 7, "oslo", "bern", "riga")
    with pytest.warns(OneAnswerWarning, match=r'answers \{"answer": "ROME"\} to all 10 validation examples, whose '
                                              r"labels hold 4 different answers"):
        history = await program.fit(x, y, validation_data=(x_val, y_val), epochs=1, batch_size=2, verbose=0)
    [comparison] = history.comparisons
    assert comparison["accepted"] and comparison["candidate_score"]["mean"] == 0.7
    assert "may have learned the most common label" in comparison["note"]


def right_on_short(request) -> dict[str, str]:
    """Answers four-letter questions right (their capitals) and the rest with '?'."""
    question = last_user_json(request)["question"]
    return {"answer": question.upper() if len(question) == 4 else "?"}


async def rows_from_runs(tiny_model, tmp_path, source: str, batch_size: int):
    """Fits a program that is right on rome and oslo only; returns it, the optimizer and its SFT rows."""
    program = await functional_program(ScriptedLanguageModel(respond=right_on_short))
    optimizer = finetune(tiny_model, tmp_path, source=source)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = labelled("rome", "paris", "oslo", "berlin")
    await program.fit(x, y, validation_data=labelled("bern", "vienna"), epochs=1, batch_size=batch_size, verbose=0)
    rows = next((tmp_path / "ft").glob("sft-*/train.jsonl")).read_text().splitlines()
    return program, optimizer, rows


async def test_traces_that_earn_min_reward_become_rows(tiny_model, tmp_path, fake_export, tuned_answers):
    program, _, rows = await rows_from_runs(tiny_model, tmp_path, "traces", batch_size=2)
    answers = [json.loads(row)["messages"][-1]["content"] for row in rows]
    assert answers == [json.dumps({"answer": "ROME"}), json.dumps({"answer": "OSLO"})]
    # the prompt the model is tuned on is the one it will be served: the input schema, descriptions and all
    generator = program.modules[-1]
    assert json.loads(rows[0])["messages"][:-1] == generator.messages({"question": "rome"}, [],
                                                                      input_schema=Question.get_schema())


async def test_both_sources_give_each_conversation_once(tiny_model, tmp_path, fake_export, tuned_answers):
    program, optimizer, rows = await rows_from_runs(tiny_model, tmp_path, "both", batch_size=4)
    # the runs on rome and oslo answered their labels: the same conversations as the label rows, kept once
    assert [json.loads(row)["messages"][-1]["content"] for row in rows] == [
        json.dumps({"answer": word}) for word in ("ROME", "PARIS", "OSLO", "BERLIN")]
    assert optimizer.rows == {program.modules[-1].name: 4}


async def test_no_run_earning_min_reward_is_a_clear_error(tiny_model, tmp_path):
    program = await functional_program(always("?"))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path, source="traces"))
    x, y = labelled("rome", "oslo")
    with pytest.raises(FineTuneError, match=r"none of the 2 training runs earned min_reward=1 \(the best earned 0\)"):
        await program.fit(x, y, validation_data=labelled("bern"), epochs=1, batch_size=2, verbose=0)


async def test_a_model_it_cannot_train_is_named_before_any_call(tmp_path):
    lm = always("?")
    program = await functional_program(lm)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=FineTune(output_dir=str(tmp_path)))
    x, y = labelled("rome", "oslo")
    with pytest.raises(FineTuneError, match=r"Generator 'generator\w*' runs on 'scripted/test': cannot be trained here.*"
                                            r"remote model's weights are not on this machine.*base_model="):
        await program.fit(x, y, validation_data=labelled("bern"), epochs=1, batch_size=2, verbose=0)
    assert lm.requests == []


async def test_labels_no_generator_answers_with_are_a_clear_error(tiny_model, tmp_path):
    # a program whose Generators each miss one end: the first does not write the output, the second does not
    # read the input
    class Draft(pg.DataModel):
        draft: str

    lm = ScriptedLanguageModel(respond=lambda r: {"draft": "d"} if "draft" in r.schema["properties"] else {"answer": "A"})
    inputs = pg.Input(data_model=Question)
    draft = await pg.Generator(data_model=Draft, language_model=lm, name="drafter")(inputs)
    outputs = await pg.Generator(data_model=Answer, language_model=lm, name="writer")(draft)
    program = pg.Program(inputs=inputs, outputs=outputs, name="two_steps")
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path))
    x, y = labelled("rome", "oslo")
    with pytest.raises(FineTuneError, match=r"no Generator reads the program's input and writes its output.*"
                                            r"use source='traces'"):
        await program.fit(x, y, validation_data=labelled("bern"), epochs=1, batch_size=2, verbose=0)
    assert lm.requests == []


async def test_a_time_budget_too_small_for_one_step_says_the_measured_step_time(tiny_model, tmp_path):
    program = await functional_program(always("?"))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path, max_train_seconds=1e-9))
    x, y = labelled("rome", "oslo")
    with pytest.raises(FineTuneError, match=r"max_train_seconds=1e-09 is less than one SFT step, measured at "
                                            r"[0-9.]+ s on this machine"):
        await program.fit(x, y, validation_data=labelled("bern"), epochs=1, batch_size=2, verbose=0)


async def test_training_stops_at_the_time_budget_and_keeps_the_last_checkpoint(tiny_model, tmp_path, fake_export,
                                                                               tuned_answers, monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr("promptgym.optimizers.finetune.sft.clock", lambda: float(next(ticks)))  # one "second" a look
    program = await functional_program(always("?"))
    optimizer = finetune(tiny_model, tmp_path, n_epochs=5, max_train_seconds=3)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = labelled("rome", "oslo", "lima", "bern")
    await program.fit(x, y, validation_data=labelled("riga"), epochs=1, batch_size=4, verbose=0)
    assert 0 < optimizer.sft_steps < 10  # 5 epochs of 2 steps planned
    run = json.loads(next((tmp_path / "ft").glob("sft-*/run.json")).read_text())
    assert run["steps"] == optimizer.sft_steps and run["model_id"].startswith("local/ft-")
    assert program.modules[-1].language_model.model == run["model_id"]


def test_options_round_trip_and_the_registered_names():
    optimizer = pg.optimizers.get({"class_name": "FineTune", "config": {"source": "both", "lora": {"r": 4},
                                                                      "max_train_seconds": 60}})
    again = pg.optimizers.get({"class_name": "FineTune", "config": json.loads(json.dumps(optimizer.get_config()))})
    assert again.get_config() == optimizer.get_config() and again.lora.r == 4 and again.source == "both"
    assert isinstance(pg.optimizers.get("finetune"), pg.optimizers.FineTune)
    with pytest.raises(FineTuneError, match="source must be one of labels, traces, both"):
        FineTune(source="weights")
    with pytest.raises(FineTuneError, match="bad SFT setting"):
        FineTune(n_epochs=0)


async def test_the_progress_bar_shows_the_sft_steps_and_the_tuned_model(tiny_model, tmp_path, fake_export,
                                                                        tuned_answers, capsys):
    program = await functional_program(always("?"))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path))
    x, y = labelled("rome", "oslo", "lima", "bern")
    await program.fit(x, y, validation_data=labelled("riga"), epochs=1, batch_size=4, verbose=1)
    out = capsys.readouterr().out
    assert "SFT of " in out and "4 rows, 2 steps" in out and "  SFT 2/2 [" in out
    assert "tuned model: local/ft-finetune-" in out


async def test_a_killed_sft_resumes_from_its_checkpoint_and_other_rows_start_afresh(tiny_model, tmp_path, fake_export,
                                                                                    tuned_answers, monkeypatch):
    from promptgym.optimizers.finetune import sft as module

    x, y = labelled("rome", "oslo", "lima", "bern")
    calls = []
    real = module.run_sft_job

    def killed_after_the_first_checkpoint(settings, folder, seed, name, max_seconds, on_event):
        calls.append(folder)
        if len(calls) == 1:  # the first fit dies after step 2's checkpoint (save_steps=2 of 4 steps)
            def stop_at_checkpoint(event):
                on_event(event)
                if event.kind == "checkpoint_saved":
                    raise KeyboardInterrupt

            return real(settings, folder, seed, name, max_seconds, stop_at_checkpoint)
        return real(settings, folder, seed, name, max_seconds, on_event)

    monkeypatch.setattr(module, "run_sft_job", killed_after_the_first_checkpoint)
    options = dict(n_epochs=2, sft={"save_steps": 2})
    program = await functional_program(always("?"))
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path, **options))
    with pytest.raises(KeyboardInterrupt):
        await program.fit(x, y, validation_data=labelled("riga"), epochs=1, batch_size=4, verbose=0)
    recorder = EventRecorder()
    again = await functional_program(always("?"))
    again.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path, **options))
    await again.fit(x, y, validation_data=labelled("riga"), epochs=1, batch_size=4, verbose=0, callbacks=[recorder])
    [started] = recorder.of("sft_started")
    assert started["resume_from_step"] == 2 and again.training_setup.optimizer.sft_steps == 4

    other = await functional_program(always("?"))  # other rows in the same folder: a fresh run, not a resume
    other.compile(reward=pg.rewards.ExactMatch(), optimizer=finetune(tiny_model, tmp_path, **options))
    recorder = EventRecorder()
    await other.fit(*labelled("paris", "lima", "doha", "suva"), validation_data=labelled("riga"), epochs=1,
                    batch_size=4, verbose=0, callbacks=[recorder])
    assert recorder.of("sft_started")[0]["resume_from_step"] is None


def test_the_cli_preview_times_one_sft_step_of_each_finetune_stage(tiny_model, tmp_path):
    import asyncio

    from rich.console import Console

    from promptgym.cli.build import build_run_plan
    from promptgym.cli.config import validate_config
    from promptgym.cli.preview import print_checks_before_run

    params = {"base_model": str(tiny_model), "max_length": 4096, "batch_size": 2, "max_train_seconds": 600,
              "lora": {"r": 2, "target_modules": ["q_proj"]}}
    config = validate_config({"program": {"generator": {}},
                              "optimizer": {"stages": [{"name": "randomfewshot"}, {"name": "finetune", "params": params}]},
                              "data": {"dataset": "arithmetic", "dataset_args": {"n_train": 6, "n_test": 2}}}, "cfg")
    job = asyncio.run(build_run_plan(config))
    console = Console(record=True, width=200)
    [line] = print_checks_before_run(job, console)
    text = console.export_text()
    assert line in text and f"stage 2 FineTune: one SFT step of {tiny_model} takes" in line
    assert float(line.split(" takes ")[1].split(" s ")[0]) > 0
    assert "for <= 3 steps, stopped at max_train_seconds=600" in text


async def test_prompts_weights_prompts_in_one_fit(tiny_model, tmp_path, fake_export, tuned_answers):
    from promptgym.testing import HashEmbeddingModel

    def knn():
        return pg.optimizers.KNNFewShot(k=1, embedding_model=HashEmbeddingModel(dimensions=32))

    program = await functional_program(always("?"))
    chain = pg.optimizers.Sequence([knn(), finetune(tiny_model, tmp_path), knn()])
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=chain)
    x, y = labelled("rome", "oslo", "lima", "bern")
    history = await program.fit(x, y, validation_data=labelled("riga", "doha"), epochs=1, batch_size=4, verbose=0)
    assert history.history["stage"] == ["1:KNNFewShot", "2:FineTune", "3:KNNFewShot"]
    assert history.history["val_reward"] == [0.0, 1.0, 1.0]
    assert program.modules[-1].language_model.model.startswith("local/ft-finetune-")
    by_stage = {}
    for comparison in history.comparisons:
        by_stage.setdefault(comparison["stage"], []).append(comparison)
    # the third stage starts on the tuned model: its start is scored afresh (1.0), not read from the first
    # stage's runs of the same prompt on the base model (0.0)
    assert all(c["incumbent_score"]["mean"] == 1.0 for c in by_stage.get("3:KNNFewShot", []))
    assert any(c["accepted"] for c in by_stage["2:FineTune"])


async def test_feedback_corrections_and_good_ratings_become_the_rows(tiny_model, tmp_path, fake_export, tuned_answers):
    store = TraceStore(tmp_path / "rec" / "traces.db")
    corrected = store.record(program="qa", inputs={"question": "rome"}, outputs={"answer": "?"})
    store.add_feedback(corrected, correction={"answer": "ROMA"})
    liked = store.record(program="qa", inputs={"question": "oslo"}, outputs={"answer": "OSLO"})
    store.add_feedback(liked, rating=1)
    store.add_feedback(store.record(program="qa", inputs={"question": "bern"}, outputs={"answer": "B"}), rating=0)
    store.add_feedback(store.record(program="other", inputs={"question": "x"}), correction={"answer": "X"})
    program = await functional_program(ScriptedLanguageModel(respond=right_on_short))
    optimizer = finetune(tiny_model, tmp_path, source="feedback", traces=str(tmp_path / "rec"), traces_min_rating=1)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
    x, y = labelled("paris")
    await program.fit(x, y, validation_data=labelled("bern", "vienna"), epochs=1, batch_size=2, verbose=0)
    rows = next((tmp_path / "ft").glob("sft-*/train.jsonl")).read_text().splitlines()
    assert [json.loads(row)["messages"][-1]["content"] for row in rows] == [
        json.dumps({"answer": "ROMA"}), json.dumps({"answer": "OSLO"})]
    assert optimizer.get_config()["traces"] == str(tmp_path / "rec")


async def test_feedback_without_a_store_or_without_labels_is_a_clear_error(tiny_model, tmp_path):
    with pytest.raises(FineTuneError, match="give traces='DIR'"):
        FineTune(source="feedback")
    store = TraceStore(tmp_path / "traces.db")
    store.add_feedback(store.record(program="qa", inputs={"question": "rome"}), rating=1)
    program = await functional_program(upper())
    program.compile(reward=pg.rewards.ExactMatch(),
                    optimizer=finetune(tiny_model, tmp_path, source="feedback", traces=str(tmp_path)))
    x, y = labelled("rome")
    with pytest.raises(FineTuneError, match="no trace of program 'qa' .* has a correction"):
        await program.fit(x, y, validation_data=labelled("bern"), epochs=1, batch_size=2, verbose=0)


@pytest.mark.parametrize(("key", "value", "instead"), [
    ("learning_rate", 1e-3, "FineTune(learning_rate=0.001)"),
    ("n_epochs", 2, "FineTune(n_epochs=2)"),
    ("lora", {"r": 4}, "FineTune(lora={'r': 4})"),
    ("base_model", "local/x", "FineTune(base_model='local/x')"),
])
def test_an_sft_key_that_is_also_an_argument_says_which_argument_to_use(key, value, instead):
    with pytest.raises(FineTuneError) as raised:
        FineTune(sft={key: value})
    message = str(raised.value)
    assert f"sft={{'{key}': ...}}" in message and instead in message and "multiple values" not in message


def test_an_sft_key_finetune_sets_itself_is_refused_with_why():
    with pytest.raises(FineTuneError, match=r"sft=\{'train_file': \.\.\.\}: FineTune writes the training file itself"):
        FineTune(sft={"train_file": "rows.jsonl"})
    with pytest.raises(FineTuneError, match="sft must be a dict of SFT settings"):
        FineTune(sft=["save_steps"])
