"""Reading the data files committed under ``promptgym/datasets/data/``."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from promptgym.datasets.loaders import DatasetError, iter_jsonl, records_to_arrays

DATA_DIR = Path(__file__).resolve().parent / "data"


@cache
def _read(relpath: str) -> tuple[dict[str, Any], ...]:
    path = DATA_DIR / relpath
    if not path.is_file():
        raise DatasetError(
            "bundled data file is missing: the promptgym install is incomplete "
            "(reinstall the package; data files ship as package data)", path=str(path))
    return tuple(record for _, record in iter_jsonl(path))


def read_records(relpath: str) -> list[dict[str, Any]]:
    """The records of a bundled ``.jsonl.gz`` file (cached; callers get a copy)."""
    return [dict(r) for r in _read(relpath)]


def check_count(name: str, value: int | None, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")


def seeded_split(records: list[Any], n_train: int, seed: int,
                 limit: int | None = None) -> tuple[list[Any], list[Any]]:
    """Shuffle ``records`` with ``seed``; the first ``n_train`` are train, the rest test.

    ``limit`` then caps each split (a prefix of it, so a smaller limit gives a
    subset of a larger one).
    """
    check_count("n_train", n_train, allow_none=False)
    check_count("limit", limit)
    if n_train > len(records):
        raise ValueError(f"n_train={n_train} but the source has only {len(records)} examples")
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    train = [records[i] for i in order[:n_train]]
    test = [records[i] for i in order[n_train:]]
    if limit is not None:
        train, test = train[:limit], test[:limit]
    return train, test


def split_arrays(records: list[dict[str, Any]], path: str, input_model: Any, output_model: Any, n_train: int,
                 seed: int, limit: int | None = None) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """``seeded_split`` of ``records`` as ``(x_train, y_train), (x_test, y_test)`` object arrays of the models."""
    train, test = seeded_split(records, n_train, seed, limit)
    return (records_to_arrays(train, input_model, output_model, path=path),
            records_to_arrays(test, input_model, output_model, path=path))


def bundled_loader(file: str, input_model: Any, output_model: Any, *, n_train: int,
                   records: Callable[[], list[dict[str, Any]]] | None = None) -> Callable[..., Any]:
    """A dataset module's ``load_data(n_train, seed, limit)``: ``split_arrays`` of the bundled ``file``.

    ``n_train`` is the default train size; ``records`` reads the examples when
    they are not the file's records as they stand (``read_records(file)``).

    >>> from promptgym.datasets import boolq
    >>> load = bundled_loader("boolq/validation_subset.jsonl.gz", boolq.Question, boolq.Answer, n_train=10)
    >>> [len(split[0]) for split in load(limit=3)]
    [3, 3]
    """
    read = records or (lambda: read_records(file))

    def load_data(n_train: int = n_train, seed: int = 0, limit: int | None = None):
        return split_arrays(read(), file, input_model, output_model, n_train, seed, limit)

    load_data.__doc__ = f"""``(x_train, y_train), (x_test, y_test)`` as NumPy object arrays.

    Args:
        n_train: how many of the bundled examples form the train split (default
            {n_train}); the rest are the test split. ``0`` = all are test.
        seed: shuffles the examples before the cut; same seed, same split.
        limit: keep at most this many examples in each split.
    """
    return load_data
