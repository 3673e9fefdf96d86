"""Small programs for the serving tests: question -> answer on a scripted model (or any model given)."""

from __future__ import annotations

from typing import Any

import promptgym as pg
from promptgym.lm.errors import LMConnectionError
from promptgym.testing import ScriptedLanguageModel, last_user_json


class Question(pg.DataModel):
    question: str
    context: str = ""


class Answer(pg.DataModel):
    answer: str


def shouting_model(**kwargs: Any) -> ScriptedLanguageModel:
    """Answers each question in capitals (a failure for the question 'fail')."""

    def respond(request: Any) -> Any:
        question = last_user_json(request)["question"]
        return LMConnectionError("scripted failure") if question == "fail" else {"answer": question.upper()}

    return ScriptedLanguageModel(respond=respond, **kwargs)


async def qa_program(name: str = "qa", language_model: Any = None, **model_kwargs: Any) -> pg.Program:
    lm = language_model or shouting_model(**model_kwargs)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm, instructions="Answer.")(inputs)
    return pg.Program(inputs=inputs, outputs=outputs, name=name, description=f"{name}: answers questions")
