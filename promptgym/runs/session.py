"""Deprecated: this module is :mod:`promptgym.runs.attempt` and ``RunSession`` is ``RunAttempt`` (issue 40).

Kept because docs/writing_a_flow.md taught ``from promptgym.runs.session import RunSession``; each name
still imports, with a DeprecationWarning that names the new spelling.
"""

from __future__ import annotations

from promptgym.core.deprecation import renamed_names
from promptgym.runs import attempt

__getattr__ = renamed_names(__name__, {"RunSession": "RunAttempt", "CancellingStop": "CancellingStop"},
                            vars(attempt), hint=" from promptgym.runs.attempt")
