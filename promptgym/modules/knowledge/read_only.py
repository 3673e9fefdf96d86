"""Whether knowledge bases rebuilt from a saved program open their file read-only (a served program's do).

    with read_only_knowledge_bases():
        program = Program.load("rag.json")     # its KnowledgeBase opens the file with read_only=True

It lives in this layer, not in ``promptgym.knowledge_bases``, so that the
server can say so without importing DuckDB (an optional extra).
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator

_READ_ONLY = contextvars.ContextVar("promptgym_knowledge_bases_read_only", default=False)


@contextmanager
def read_only_knowledge_bases() -> Iterator[None]:
    """Knowledge bases rebuilt from a config inside the block open their file read-only (and never wipe it).

    A served program then can't write its knowledge base, and ``promptgym kb search`` or a second server
    can read the file alongside (DuckDB lets many processes read a file, or one write it).

    >>> with read_only_knowledge_bases():
    ...     opening_read_only()
    True
    >>> opening_read_only()
    False
    """
    token = _READ_ONLY.set(True)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


class KnowledgeBaseWriteRefused(ValueError):
    """A write to a knowledge base opened read-only (``KnowledgeBaseError`` subclasses it in the store's layer)."""


def opening_read_only() -> bool:
    """True inside :func:`read_only_knowledge_bases`."""
    return _READ_ONLY.get()
