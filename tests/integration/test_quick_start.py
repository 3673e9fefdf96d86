"""The seed documents' workflow, as written, on the real embedded engine (smallest model)."""

from __future__ import annotations

import pytest

import promptgym as synalinks
from promptgym.datasets import dates
from promptgym.lm.local_models import SMALLEST_LOCAL_MODEL

pytestmark = pytest.mark.integration


async def test_compile_fit_evaluate_predict_save_load_evaluate(tmp_path):
    (x_train, y_train), (x_test, y_test) = dates.load_data(n_train=6, n_test=4, seed=1)
    lm = synalinks.LanguageModel(model=f"local/{SMALLEST_LOCAL_MODEL}", max_tokens=32)

    inputs = synalinks.Input(data_model=dates.Text)
    outputs = await synalinks.Generator(data_model=dates.Date, language_model=lm, max_string_length=24)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="dates")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["date"]),
        optimizer=synalinks.optimizers.RandomFewShot(),
        metrics=[synalinks.metrics.F1Score(in_mask=["date"])],
    )
    history = await program.fit(x=x_train, y=y_train, validation_split=0.34, epochs=1, batch_size=2, verbose=0)
    assert set(history.history) >= {"reward", "f1_score", "val_reward", "val_f1_score", "lm_calls"}
    assert history.history["lm_calls"][0] >= 2  # at least one race: the first candidate on the 2 validation examples
    assert program.training_setup.optimizer.demos.pool.size() == 4  # every training label, before any call

    metrics = await program.evaluate(x=x_test, y=y_test, verbose=0)
    assert 0.0 <= metrics["reward"] <= 1.0 and 0.0 <= metrics["f1_score"] <= 1.0
    predictions = await program.predict(x_test, batch_size=4, verbose=0)
    assert len(predictions) == 4 and all(p is None or isinstance(p.date, str) for p in predictions)

    program.save(tmp_path / "trained.json")
    loaded = synalinks.Program.load(tmp_path / "trained.json")
    assert loaded.get_variables() == program.get_variables()
    assert await loaded.evaluate(x=x_test, y=y_test, verbose=0) == metrics
