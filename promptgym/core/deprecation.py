"""Old names kept as deprecated aliases of renamed module attributes (one word, one meaning: issue 26).

    __getattr__ = renamed_names(__name__, {"PromptState": "TrainablePrompt"}, globals())

``from module import PromptState`` still works, with a DeprecationWarning that names the new spelling.
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
