"""Program factories the fault cases name in their configs (``factory = "factories:..."``)."""

from __future__ import annotations

import json

import promptgym as pg
from promptgym.testing import ScriptedLanguageModel, last_user_json


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


def scripted(language_model=None, delay_s: float = 0.0) -> pg.Program:
    """Upper-cases the question: right on every example of ``data_lines``."""
    lm = ScriptedLanguageModel(respond=lambda request: {"answer": last_user_json(request)["question"].upper()},
                               delay_s=delay_s)
    generator = pg.Generator(data_model=Answer, language_model=lm, name="answerer", instructions="Upper-case it.")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")


def half_wrong(language_model=None) -> pg.Program:
    """Right on questions of an even length, wrong ("WRONG") on the others: a program export-sft-data must filter."""
    lm = ScriptedLanguageModel(respond=lambda request: {"answer": (lambda q: q.upper() if len(q) % 2 == 0 else "WRONG")(
        last_user_json(request)["question"])})
    generator = pg.Generator(data_model=Answer, language_model=lm, name="answerer", instructions="Upper-case it.")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")


def served(language_model=None) -> pg.Program:
    """The same program on the config's model (a server)."""
    generator = pg.Generator(data_model=Answer, language_model=language_model, name="answerer")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")


def not_a_program(language_model=None):
    return 42


def raising(language_model=None):
    raise RuntimeError("the factory could not build its program")


NOT_CALLABLE = "just a string"

WORDS = ["ab", "cat", "house", "garden", "river", "mountain", "tree", "sky", "stone", "window", "door", "lamp"]


def data_lines(count: int = 12) -> str:
    return "".join(json.dumps({"prompt": word, "label": word.upper()}) + "\n" for word in WORDS[:count])
