"""Config texts for the fault cases: a good base and the pieces a case swaps in."""

from __future__ import annotations

from factories import data_lines

DATA_SECTION = """[data]
train = "train.jsonl"
x_fields = { question = "prompt" }
y_fields = { answer = "label" }
validation_split = 0.25
"""

SCRIPTED_PROGRAM = '[program]\nfactory = "factories:scripted"\n'

GENERATOR_PROGRAM = """[program.generator]
name = "answerer"
inputs = { question = "A question" }
outputs = { answer = "The answer" }
"""

TRAINING = """[optimizer]
name = "randomfewshot"
params = { nb_max_examples = 2 }

[training]
epochs = 2
batch_size = 3
minibatch_size = 3
"""


def config(job: str = '[job]\nname = "fault"\n', model: str = "", program: str = SCRIPTED_PROGRAM,
           data: str = DATA_SECTION, training: str = TRAINING, extra: str = "") -> str:
    return "\n".join(part for part in (job, model, program, data, training, extra) if part)


def served_model(api_base: str, extra: str = "") -> str:
    return f'[model]\nname = "openai/fake"\napi_base = "{api_base}"\n{extra}'


def files(text: str, data: str | bytes | None = None, name: str = "run.toml") -> dict[str, str | bytes]:
    return {name: text, "train.jsonl": data_lines() if data is None else data}
