"""The example optimizer of docs/writing_an_optimizer.md: it works, saves, and the doc shows it whole (and the
weight optimizer's example, whose run is tests/finetune/test_writing_a_weight_optimizer.py)."""

from __future__ import annotations

import pytest

import promptgym as pg
from tests.optimizers.prompt_search_support import GOOD, data, program_for, task_lm
from tests.support import EXAMPLES, load_example


@pytest.mark.usefixtures("no_token_rule")  # too few validation examples for the rule
async def test_the_example_optimizer_keeps_the_instructions_that_win(tmp_path):
    InstructionList = load_example("custom_optimizer.py").InstructionList
    program = await program_for(task_lm())
    program.compile(reward=pg.rewards.ExactMatch(),
                    optimizer=InstructionList(["Be brief.", GOOD, "Answer in lower case."], max_metric_calls=30))
    x, y = data(6)
    xv, yv = data(4, start=100)
    history = await program.fit(x, y, validation_data=(xv, yv), epochs=1, batch_size=2, minibatch_size=4, verbose=0)

    optimizer = program.training_setup.optimizer
    assert program.trainable_variables[0].get("instructions") == GOOD
    assert optimizer.tried == 3 and [c.origin for c in optimizer.candidates][1:] == ["instruction_list"] * 3
    assert history.history["val_reward"] == [1.0] and 0 < optimizer.budget.spent <= 30
    program.save(str(tmp_path / "program.json"))
    loaded = pg.Program.load(str(tmp_path / "program.json")).training_setup.optimizer
    assert (loaded.tried, loaded.budget.spent, loaded.best_id) == (3, optimizer.budget.spent, optimizer.best_id)


@pytest.mark.parametrize("example", ["custom_optimizer.py", "custom_weight_optimizer.py"])
def test_the_doc_shows_the_whole_example(example):
    doc = (EXAMPLES.parent / "docs" / "writing_an_optimizer.md").read_text()
    assert (EXAMPLES / example).read_text().strip() in doc
