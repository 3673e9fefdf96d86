"""The errors a knowledge base raises for a store it cannot use as asked.

    >>> raise KnowledgeBaseError("knowledge base kb.db is locked")
    Traceback (most recent call last):
    ...
    promptgym.knowledge_bases.errors.KnowledgeBaseError: knowledge base kb.db is locked
"""

from __future__ import annotations

from promptgym.modules.knowledge.read_only import KnowledgeBaseWriteRefused


class KnowledgeBaseError(ValueError):
    """A knowledge base that cannot be used as asked (locked, corrupt, another schema or dimension)."""


class ReadOnlyKnowledgeBaseError(KnowledgeBaseError, KnowledgeBaseWriteRefused):
    """A write to a knowledge base opened with ``read_only=True`` (a served program's, for one)."""
