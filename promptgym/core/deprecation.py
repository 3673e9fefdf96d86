"""Old names kept as deprecated aliases of renamed module attributes (one word, one meaning: issue 26).

    __getattr__ = renamed_names(__name__, {"PromptState": "TrainablePrompt"}, globals())

``from module import PromptState`` still works, with a DeprecationWarning that names the new spelling.
A renamed keyword argument: ``executor = renamed_keyword("sft", "backend", backend, "executor", executor)``.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable


def renamed_names(module: str, renames: dict[str, str], namespace: dict[str, Any], hint: str = ""
                  ) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving each old name in ``renames`` as its new name's object, with a warning."""

    def __getattr__(name: str) -> Any:
        if name in renames:
            warnings.warn(f"{module}.{name} is deprecated: use {renames[name]}{hint}", DeprecationWarning,
                          stacklevel=2)
            return namespace[renames[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def renamed_keyword(function: str, old: str, old_value: Any, new: str, new_value: Any) -> Any:
    """The value of keyword ``new``, or of its deprecated name ``old`` (with a DeprecationWarning) when only it
    was passed; None is "not passed".

    >>> renamed_keyword("sft", "backend", None, "executor", "ray")
    'ray'
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"{function}() got both {old}= and {new}=: pass only {new}=")
    warnings.warn(f"{function}(..., {old}=) is deprecated: use {new}=", DeprecationWarning, stacklevel=3)
    return old_value
