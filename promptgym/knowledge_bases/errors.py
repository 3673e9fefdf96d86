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


def show_columns(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"{name}: {kind}" for name, kind in columns)


def fields_changed(uri: str, table: str, existing: list[tuple[str, str]], wanted: list[tuple[str, str]],
                   title: str | None) -> KnowledgeBaseError:
    """A reopened table whose DataModel now declares other fields (both adapters raise this)."""
    return KnowledgeBaseError(
        f"knowledge base {uri}: table {table!r} was created with fields ({show_columns(existing)}) but "
        f"the data model {title!r} now declares ({show_columns(wanted)}); keep the old data "
        "model, use another title, or rebuild the knowledge base (wipe_on_start=True)")


def dimension_changed(uri: str, table: str, stored: int, built_with: str | None, embedder: str,
                      dimension: int) -> KnowledgeBaseError:
    """Vectors of another size than the table stores."""
    return KnowledgeBaseError(
        f"knowledge base {uri}: table {table!r} stores {stored}-dimensional vectors "
        f"(embedded by {built_with or 'an unrecorded model'}) but {embedder} gives {dimension}-dimensional "
        "ones; use the model the table was built with, or rebuild it (wipe_on_start=True)")


def embedder_changed(uri: str, table: str, built_with: str, embedder: str) -> KnowledgeBaseError:
    """Vectors of the same size from another model: not comparable."""
    return KnowledgeBaseError(
        f"knowledge base {uri}: table {table!r} was embedded by {built_with} but this knowledge base embeds "
        f"with {embedder}; their vectors are not comparable: use {built_with}, or rebuild (wipe_on_start=True)")
