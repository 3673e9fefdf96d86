"""What every dataset module has: the synalinks-style getters, the export list, the train/test arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from promptgym.datasets.loaders import to_object_array

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741

DATASET_API = ("get_input_data_model", "get_output_data_model", "load_data")
"""The names every dataset module exports (synalinks' ``datasets.<name>`` contract)."""

BUNDLED_API = (*DATASET_API, "LICENSE", "SOURCE_SIZE")
"""A dataset read from a committed file adds its licence and its number of examples."""


def model_getters(input_model: type[I], output_model: type[O]) -> tuple[Callable[[], type[I]], Callable[[], type[O]]]:
    """A dataset module's ``get_input_data_model`` and ``get_output_data_model``.

    >>> get_input, get_output = model_getters(int, str)
    >>> get_input(), get_output()
    (<class 'int'>, <class 'str'>)
    """
    def get_input_data_model() -> type[I]:
        return input_model

    def get_output_data_model() -> type[O]:
        return output_model

    get_input_data_model.__doc__ = f"The input DataModel (``{input_model.__name__}``)."
    get_output_data_model.__doc__ = f"The target DataModel (``{output_model.__name__}``)."
    return get_input_data_model, get_output_data_model


def first_n_train(xs: Sequence[Any], ys: Sequence[Any], n_train: int) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    """``(x_train, y_train), (x_test, y_test)`` object arrays: the first ``n_train`` pairs train, the rest test.

    >>> (x_train, y_train), (x_test, y_test) = first_n_train([1, 2, 3], ["a", "b", "c"], 2)
    >>> list(x_train), list(y_test)
    ([1, 2], ['c'])
    """
    return ((to_object_array(xs[:n_train]), to_object_array(ys[:n_train])),
            (to_object_array(xs[n_train:]), to_object_array(ys[n_train:])))
