"""Automatic module and variable names: ``generator``, ``generator_1``, ... (Keras-style), per process."""

from __future__ import annotations

import collections

_name_counts: collections.Counter[str] = collections.Counter()


def snake_case(name: str) -> str:
    """``ChainOfThought`` -> ``chain_of_thought``."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def unique_name(base: str) -> str:
    """``generator``, ``generator_1``, ... (Keras-style automatic names)."""
    count = _name_counts[base]
    _name_counts[base] += 1
    return base if count == 0 else f"{base}_{count}"


def reset_names() -> None:
    """Start automatic names again from ``generator``, ``generator_1``... (``clear_session()``)."""
    _name_counts.clear()
