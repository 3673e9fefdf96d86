import csv
import io
import json

import numpy as np
import pytest

import promptgym as synalinks
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import Answer, Question, questions


def learns_from_examples(request):
    """Correct only when the prompt carries at least one example."""
    question = last_user_json(request)["question"]
    return {"answer": question.upper() if len(request.messages) > 2 else "?"}


def data(n=20):
    x = questions(*[f"q{i}" for i in range(n)])
    y = np.array([Answer(answer=f"Q{i}") for i in range(n)], dtype=object)
    return x, y


async def compiled_program(lm=None, optimizer=None, name="p"):
    lm = lm or ScriptedLanguageModel(respond=learns_from_examples)
    inputs = synalinks.Input(data_model=Question)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name=name)
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=optimizer or synalinks.optimizers.RandomFewShot(),
        metrics=[synalinks.metrics.F1Score(in_mask=["answer"])],
    )
    return program, lm


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_fit_improves_and_history_has_the_documented_keys():
    program, lm = await compiled_program()
    x, y = data()
    before = await program.evaluate(x, y, verbose=0)
    history = await program.fit(x=x, y=y, validation_split=0.2, epochs=2, batch_size=4, verbose=0)
    after = await program.evaluate(x, y, verbose=0)
    assert before["reward"] == 0.0 and after["reward"] == 1.0
    for key in ("reward", "f1_score", "val_reward", "val_f1_score", "lm_calls", "prompt_tokens", "completion_tokens",
                "lm_calls_inference", "lm_calls_reward", "lm_calls_optimizer"):
        assert len(history.history[key]) == 2, key
    assert history.epoch == [0, 1]
    examples = program.trainable_variables[0].get("examples")
    assert 1 <= len(examples) <= 3
    assert all(e["outputs"]["answer"] == e["inputs"]["question"].upper() for e in examples)


async def test_same_seed_same_history_and_variables(tmp_path):
    runs = []
    for name in ("a", "b"):
        program, _ = await compiled_program(name=name)
        x, y = data()
        history = await program.fit(x=x, y=y, epochs=2, batch_size=3, shuffle=True, seed=7, verbose=0)
        runs.append((history.history, list(program.get_variables().values())))
    assert runs[0] == runs[1]


async def test_failures_score_zero_and_max_errors_aborts():
    def flaky(request):
        if last_user_json(request)["question"] in ("q1", "q2"):
            raise RuntimeError("model crashed")
        return learns_from_examples(request)

    program, _ = await compiled_program(lm=ScriptedLanguageModel(respond=flaky, output_retries=0))
    x, y = data(10)
    events = []

    class Recorder(synalinks.callbacks.Callback):
        def on_event(self, event):
            events.append(event)

    history = await program.fit(x=x, y=y, validation_data=(x, y), epochs=1, batch_size=5, minibatch_size=10,
                                verbose=0, callbacks=[Recorder()])
    failed = {(e["split"], e["index"]) for e in events if e["event"] == "example_failed"}
    assert {index for _, index in failed} == {1, 2} and ("val", 1) in failed and ("val", 2) in failed
    assert history.history["failures"][0] >= 2
    assert history.history["val_reward"][0] == 0.8  # trained: right everywhere except the two crashes
    program2, _ = await compiled_program(lm=ScriptedLanguageModel(respond=flaky, output_retries=0), name="p2")
    with pytest.raises(synalinks.training.TrainingAborted, match="more than max_errors=1"):
        await program2.fit(x=x, y=y, validation_data=(x, y), epochs=1, batch_size=5, minibatch_size=10, verbose=0,
                           max_errors=1)


async def test_clear_errors_before_any_call():
    program, lm = await compiled_program()
    x, y = data(4)
    with pytest.raises(ValueError, match=r"different lengths \(4 and 3\)"):
        await program.fit(x=x, y=y[:3], verbose=0)

    class Other(synalinks.DataModel):
        label: str

    with pytest.raises(ValueError, match=r"y\[0\] \(Other\) has field 'label'.*fields: answer"):
        await program.fit(x=x, y=np.array([Other(label="a")] * 4, dtype=object), verbose=0)
    fresh, _ = await compiled_program(name="fresh")
    fresh.training_setup = None
    with pytest.raises(RuntimeError, match=r"fit\(\) needs compile\(\) first"):
        await fresh.fit(x=x, y=y)
    with pytest.raises(ValueError, match="in_mask names field 'answr'"):
        program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answr"]), optimizer="randomfewshot")
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        program.compile(reward="exactmatch", optimizer="sgd")
    assert lm.requests == []


async def test_callbacks_sync_and_async_with_program_bound(tmp_path):
    calls = []

    class Sync(synalinks.callbacks.Callback):
        def on_train_begin(self, logs=None):
            calls.append(("train_begin", self.program.name))

        def on_epoch_end(self, epoch, logs=None):
            calls.append(("epoch_end", epoch, logs["reward"]))

    class Async(synalinks.callbacks.Callback):
        async def on_train_batch_end(self, batch, logs=None):
            calls.append(("batch_end", batch))

        async def on_train_end(self, logs=None):
            calls.append(("train_end",))

    program, _ = await compiled_program(name="cb")
    x, y = data(8)
    await program.fit(x=x, y=y, validation_split=0.25, epochs=1, batch_size=3, verbose=0, callbacks=[Sync(), Async()])
    assert calls[0] == ("train_begin", "cb")
    assert [c for c in calls if c[0] == "batch_end"] == [("batch_end", 0), ("batch_end", 1)]
    assert calls[-1] == ("train_end",) and calls[-2][0] == "epoch_end"


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_checkpoint_csv_and_resume(tmp_path):
    program, _ = await compiled_program(name="ckpt")
    x, y = data(12)
    checkpoint = synalinks.callbacks.ProgramCheckpoint(tmp_path / "best.json", monitor="val_reward", mode="max",
                                                       save_best_only=True)
    csv_logger = synalinks.callbacks.CSVLogger(tmp_path / "log.csv")
    await program.fit(x=x, y=y, validation_split=0.25, epochs=1, batch_size=3, verbose=0,
                      callbacks=[checkpoint, csv_logger])
    rows = list(csv.DictReader(io.StringIO((tmp_path / "log.csv").read_text())))
    assert [r["epoch"] for r in rows] == ["0"] and float(rows[0]["val_reward"]) == 1.0
    saved = json.loads((tmp_path / "best.json").read_text())
    assert saved["optimizer_state"]["epochs_done"] == 1 and saved["optimizer_state"]["candidates"]
    loaded = synalinks.Program.load(tmp_path / "best.json")
    assert loaded.training_setup.optimizer.best.variables == program.training_setup.optimizer.best.variables
    for module in loaded.modules:
        module.language_model = program.modules[-1].language_model
    result = await loaded.evaluate(x, y, verbose=0)
    assert result["reward"] == 1.0
    await loaded.fit(x=x, y=y, validation_split=0.25, epochs=2, initial_epoch=1, batch_size=3, verbose=0)
    assert loaded.training_setup.optimizer.epochs_done == 2


async def test_early_stopping_stops():
    program, _ = await compiled_program(name="early")
    x, y = data(8)
    stopper = synalinks.callbacks.EarlyStopping(monitor="val_reward", patience=1)
    history = await program.fit(x=x, y=y, validation_split=0.25, epochs=5, batch_size=3, verbose=0, callbacks=[stopper])
    assert len(history.epoch) == 2 and stopper.stopped_epoch == 1


async def test_greedy_optimizer_learns_too():
    program, _ = await compiled_program(optimizer="greedyoptimizer", name="greedy")
    x, y = data(12)
    await program.fit(x=x, y=y, validation_split=0.25, epochs=1, batch_size=3, verbose=0)
    assert (await program.evaluate(x, y, verbose=0))["reward"] == 1.0


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_progress_bar_prints_epochs_and_metrics(capsys):
    program, _ = await compiled_program(name="verbose")
    x, y = data(8)
    await program.fit(x=x, y=y, validation_split=0.25, epochs=1, batch_size=3)
    out = capsys.readouterr().out
    assert "Epoch 1/1" in out and "val_reward: 1.0000" in out and "train 2/2" in out


async def test_history_keeps_the_interval_of_each_validation_score():
    lm = ScriptedLanguageModel(respond=lambda request: {"answer": last_user_json(request)["question"].upper()})
    program = synalinks.Sequential([synalinks.Input(data_model=Question),
                                    synalinks.Generator(data_model=Answer, language_model=lm)])
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=synalinks.optimizers.RandomFewShot())
    x = questions(*"abcdef")
    y = np.array([Answer(answer=q.upper()) for q in "abcdef"], dtype=object)
    history = await program.fit(x[:3], y[:3], validation_data=(x[3:], y[3:]), epochs=2, batch_size=3,
                                validation_freq=2, verbose=0)
    assert history.intervals["val_reward"][0] is None
    interval = history.intervals["val_reward"][1]
    assert (interval.mean, interval.n, interval.method) == (1.0, 3, "wilson") and interval.low < 0.5
