"""A saved program loads in a fresh interpreter that imported nothing but ``promptgym``."""

from __future__ import annotations

import json
import subprocess
import sys

import promptgym as pg
from tests.support import Answer, Question

LOAD_AND_DESCRIBE = """
import json, sys
import promptgym
program = promptgym.Program.load(sys.argv[1])
state = program.training_setup
print(json.dumps({"reward": type(state.reward).__name__, "optimizer": type(state.optimizer).__name__,
                  "metrics": [type(m).__name__ for m in state.metrics]}))
"""


async def test_a_compiled_program_loads_in_a_new_process(tmp_path):
    lm = pg.LanguageModel(model="openai/never-called", api_base="http://127.0.0.1:9/v1")
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm)(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="qa")
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]), optimizer=pg.optimizers.OMEGA(
        language_model=lm, algorithm="ga"), metrics=[pg.metrics.F1Score(), pg.metrics.Mean()])
    path = tmp_path / "program.json"
    program.save(str(path))

    done = subprocess.run([sys.executable, "-c", LOAD_AND_DESCRIBE, str(path)], capture_output=True, text=True,
                          timeout=120)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "reward": "ExactMatch", "optimizer": "OMEGA", "metrics": ["F1Score", "Mean"]}
