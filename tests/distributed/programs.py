"""Programs for the executor tests: a registered scripted model that a Ray worker rebuilds from JSON.

The model answers in upper case, fails on chosen words, and can kill its own process the first time
it sees a word (a worker dying mid-batch): a marker file makes "the first time" hold across processes.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import promptgym as pg
from promptgym.testing import ScriptedLanguageModel, last_user_json


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


@pg.register_synalinks_serializable()
class UpperCaseLM(ScriptedLanguageModel):
    def __init__(self, fail_words: list[str] | None = None, die_word: str | None = None,
                 marker: str | None = None, delay_s: float = 0.0, **kwargs: Any) -> None:
        kwargs.pop("responses", None)
        self.fail_words, self.die_word, self.marker, self.delay_s = list(fail_words or []), die_word, marker, delay_s
        super().__init__(respond=self.answer, delay_s=delay_s, **kwargs)

    def answer(self, request: Any) -> Any:
        question = last_user_json(request)["question"]
        if question == self.die_word and self.marker and not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        if question in self.fail_words:
            return "not json at all"
        shown = len(request.messages) > 2  # a demonstration in the prompt teaches the upper case
        return {"answer": question.upper() if shown or len(question) <= 3 else question}

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "fail_words": self.fail_words, "die_word": self.die_word,
                "marker": self.marker, "delay_s": self.delay_s}


WORDS = ["ab", "cat", "house", "garden", "river", "mountain", "tree", "sky", "stone", "window",
         "door", "lamp", "chair", "table", "cloud", "bird", "fish", "road", "hill", "lake"]


def build_program(**lm_args: Any) -> pg.Program:
    lm = UpperCaseLM(concurrency=4, output_retries=0, **lm_args)
    generator = pg.Generator(data_model=Answer, language_model=lm, name="answerer", instructions="Answer in upper case.")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")


def dataset(words: list[str] = WORDS) -> tuple[Any, Any]:
    import numpy as np

    x = np.array([Question(question=w) for w in words], dtype=object)
    y = np.array([Answer(answer=w.upper()) for w in words], dtype=object)
    return x, y


def build_cli_program() -> pg.Program:
    """The same program for `promptgym train --executor ray` configs (a factory without arguments)."""
    return build_program()
