"""The checks every retriever's ``settings`` variable shares: result counts are positive integers.

>>> count_problem({"k": 3, "k_rank": 1}, ("k", "k_rank")) is None, count_problem({"k": 0}, ("k",))
(True, '`k` must be a positive integer, got 0')
>>> count_problem({}, ("k_rank",), default=1) is None
True
"""

from __future__ import annotations

from typing import Any

_REQUIRED = object()


def count_problem(settings: dict[str, Any], keys: tuple[str, ...], default: Any = _REQUIRED) -> str | None:
    """What is wrong with the counts ``keys`` of ``settings`` (a bool is not a count), or None.

    A missing key is an error unless a ``default`` is given (the single-table retrievers' optional keys).
    """
    for key in keys:
        value = settings.get(key) if default is _REQUIRED else settings.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"`{key}` must be a positive integer, got {value!r}"
    return None
