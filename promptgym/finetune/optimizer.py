"""Moved: ``FineTune`` lives in :mod:`promptgym.optimizers.finetune`, beside the other optimizers.

This module name still resolves its names (with a DeprecationWarning), so older imports keep working::

    from promptgym.optimizers import FineTune         # the spelling to use
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

NEW_HOME = "promptgym.optimizers.finetune"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    # by name, not an import statement: this layer sits below optimizers/, which imports the SFT engine from here
    module = importlib.import_module(NEW_HOME)
    if not hasattr(module, name):
        module = importlib.import_module(f"{NEW_HOME}.optimizer")
    warnings.warn(f"promptgym.finetune.optimizer.{name} is deprecated: use {NEW_HOME}.{name}", DeprecationWarning,
                  stacklevel=2)
    return getattr(module, name)
