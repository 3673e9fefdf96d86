"""The weight optimizer of docs/writing_an_optimizer.md (examples/custom_weight_optimizer.py): it trains the tiny
in-test model on the labels, the tuned program wins its race, and the program saves with it (that the doc shows it
whole is tests/optimizers/test_writing_an_optimizer.py's check).

As in test_finetune_optimizer.py, the GGUF export is faked and the tuned model runs as a scripted one."""

from __future__ import annotations

import json

import promptgym as pg
from promptgym.modules.model_choice import set_model_factory
from promptgym.testing import ScriptedLanguageModel, last_user_json
from tests.support import functional_program, labelled, load_example


async def test_the_example_weight_optimizer_trains_and_keeps_the_tuned_model(tiny_model, tmp_path, fake_export):
    built: list[str] = []

    def tuned(base, model):  # the tuned model answers right: the question in upper case
        built.append(model)
        return ScriptedLanguageModel(respond=lambda r: {"answer": last_user_json(r)["question"].upper()}, model=model)

    previous = set_model_factory(tuned)
    try:
        LabelSFT = load_example("custom_weight_optimizer.py").LabelSFT
        program = await functional_program(ScriptedLanguageModel(respond=lambda r: {"answer": "?"}))
        optimizer = LabelSFT(str(tiny_model), output_dir=str(tmp_path / "sft"),
                             sft={"batch_size": 2, "max_length": 4096, "validation_split": 0.0, "summary_samples": 0,
                                  "lora": {"r": 2, "target_modules": ["q_proj", "v_proj"]}})
        program.compile(reward=pg.rewards.ExactMatch(), optimizer=optimizer)
        history = await program.fit(*labelled("paris", "rome", "oslo", "lima"), validation_data=labelled("bern", "riga"),
                                    epochs=1, batch_size=4, verbose=0)
    finally:
        set_model_factory(previous)

    model = program.modules[-1].language_model.model
    assert optimizer.model_id == model and built == [model]
    rows = [json.loads(line) for line in (tmp_path / "sft" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and rows[0]["messages"][-1] == {"role": "assistant", "content": '{"answer": "PARIS"}'}
    assert [c["accepted"] for c in history.comparisons] == [True] and history.history["val_reward"] == [1.0]
    program.save(tmp_path / "program.json")
    loaded = pg.Program.load(tmp_path / "program.json")
    assert loaded.training_setup.optimizer.model_id == model  # a resumed fit would not train again
