"""Tasks of reasoning-gym: 100+ seeded generators with exact answers.

A thin bridge to the ``reasoning-gym`` package (Apache-2.0; optional,
``pip install "promptgym[datasets]"``, pinned ``reasoning-gym==0.1.25``).
Nothing is stored: the examples are generated from ``seed``.

- **Splits**: ``reasoning_gym.create_dataset(task, size=n_train + n_test,
  seed=seed, **config)``; the first ``n_train`` items are train, the rest
  test. Same arguments and same reasoning-gym version, same data.
- **Fields**: ``Question.question`` (str, the task's prompt);
  ``Answer.answer`` (str, the reference answer, compared as text).

Example::

    (x_train, y_train), (x_test, y_test) = promptgym.datasets.reasoning_gym.load_data(
        "chain_sum", n_train=100, n_test=50, seed=0, min_terms=2, max_terms=3)

:func:`load_dataset` returns reasoning-gym's own dataset object too, whose
``score_answer(answer, entry)`` grades answers leniently where a task
allows several correct forms.
"""

from __future__ import annotations

import importlib
from typing import Any

from promptgym.core.data_model import DataModel, Field
from promptgym.datasets._api import DATASET_API, first_n_train, model_getters
from promptgym.datasets._bundled import check_count

__all__ = [*DATASET_API, "PIN", "Answer", "Question", "load_dataset"]

PIN = "reasoning-gym==0.1.25"


class Question(DataModel):
    question: str = Field(description="The task")


class Answer(DataModel):
    answer: str = Field(description="The final answer")


get_input_data_model, get_output_data_model = model_getters(Question, Answer)


def _rg() -> Any:
    try:
        return importlib.import_module("reasoning_gym")
    except ImportError:
        raise ImportError(
            f"promptgym.datasets.reasoning_gym needs the reasoning-gym package: "
            f'pip install "{PIN}" (or the "datasets" extra of promptgym)') from None


def load_dataset(task: str, size: int, seed: int = 0, **config: Any) -> Any:
    """reasoning-gym's dataset object (indexable, with ``score_answer``)."""
    rg = _rg()
    try:
        return rg.create_dataset(task, size=size, seed=seed, **config)
    except Exception as exc:
        raise ValueError(f"reasoning-gym task {task!r} with config {config}: {exc}") from exc


def load_data(task: str, n_train: int = 200, n_test: int = 100, seed: int = 0, **config: Any):
    """``(x_train, y_train), (x_test, y_test)`` for a reasoning-gym task.

    Args:
        task: a reasoning-gym dataset name (``"chain_sum"``, ``"basic_arithmetic"``...).
        n_train, n_test: sizes of the two splits.
        seed: the generator's seed.
        **config: the task's own options (``min_terms=2``...).
    """
    check_count("n_train", n_train, allow_none=False)
    check_count("n_test", n_test, allow_none=False)
    ds = load_dataset(task, n_train + n_test, seed, **config)
    entries = [ds[i] for i in range(n_train + n_test)]
    xs = [Question(question=str(e["question"])) for e in entries]
    ys = [Answer(answer=str(e["answer"])) for e in entries]
    return first_n_train(xs, ys, n_train)
