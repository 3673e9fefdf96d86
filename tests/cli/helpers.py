"""Program factories and data files for the CLI tests (scripted LM: no engine needed)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import promptgym as pg
from promptgym.runs.folder import RunFolder, list_runs
from promptgym.testing import ScriptedLanguageModel, last_user_json, QA_GENERATOR, qa_run_config

ROOT = Path(__file__).resolve().parents[2]


def only_run(folder: Path) -> RunFolder:
    runs = list_runs(folder / "runs")
    assert len(runs) == 1, runs
    return RunFolder(folder / "runs" / runs[0]["id"])


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


def learner_lm(delay_s: float = 0.0) -> ScriptedLanguageModel:
    """Right when the prompt shows a demonstration, else right only on short questions."""

    def respond(request):
        question = last_user_json(request)["question"]
        shown = len(request.messages) > 2
        return {"answer": question.upper() if shown or len(question) <= 3 else "?"}

    return ScriptedLanguageModel(respond=respond, delay_s=delay_s)


def build_program(language_model=None, delay_s: float = 0.0) -> pg.Program:
    delay = float(os.environ.get("PROMPTGYM_TEST_DELAY", delay_s))
    generator = pg.Generator(data_model=Answer, language_model=learner_lm(delay), name="answerer",
                             instructions="Answer in upper case.")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")


WORDS = ["ab", "cat", "house", "garden", "river", "mountain", "tree", "sky", "stone", "window",
         "door", "lamp", "chair", "table", "cloud", "bird"]


def write_data(folder: Path, count: int = 12) -> Path:
    path = folder / "train.jsonl"
    path.write_text("".join(json.dumps({"prompt": w, "label": w.upper()}) + "\n" for w in WORDS[:count]))
    return path


FACTORY_PROGRAM = '[program]\nfactory = "tests.cli.helpers:build_program"'
GENERATOR_PROGRAM = QA_GENERATOR


def write_config(folder: Path, epochs: int = 2, extra: str = "", program: str = FACTORY_PROGRAM, model: str = "",
                 name: str = "test-run", batch_size: int = 3, filename: str = "run.toml") -> Path:
    """A config training on ``write_data``'s 12 examples (9 train, 3 validation)."""
    config = folder / filename
    config.write_text(qa_run_config(write_data(folder), program=program, name=name, job="seed = 0", model=model,
                                    training=f"epochs = {epochs}\nbatch_size = {batch_size}\n"
                                             f"minibatch_size = {batch_size}\n{extra}"))
    return config


def served_config(folder: Path, api_base: str, epochs: int = 3) -> Path:
    """The same training with a declared Generator on ``openai/fake`` at ``api_base``, response cache off."""
    model = f'[model]\nname = "openai/fake"\napi_base = "{api_base}"\ncache = false'
    return write_config(folder, epochs, program=GENERATOR_PROGRAM, model=model, name="served", batch_size=2,
                        filename="served.toml")


def not_a_program(language_model=None) -> int:
    return 42


def raising_factory(language_model=None) -> pg.Program:
    raise RuntimeError("no program today")


def build_priced_program(language_model=None) -> pg.Program:
    """``build_program`` on a scripted model priced at $3 / $15 per million tokens (a word is a token)."""
    model = learner_lm()
    model.price_override, model.max_tokens = pg.Price(3.0, 15.0), 32
    generator = pg.Generator(data_model=Answer, language_model=model, name="answerer",
                             instructions="Answer in upper case.")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")
