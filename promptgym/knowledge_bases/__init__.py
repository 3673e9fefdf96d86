"""Knowledge bases: DataModels stored by key in DuckDB (or LanceDB: ``lancedb://``), with full-text, vector and
hybrid search.

    kb = promptgym.knowledge_bases.get("duckdb://./docs.db")      # synalinks' get/serialize/deserialize
    config = promptgym.knowledge_bases.serialize(kb)
    same = promptgym.knowledge_bases.deserialize(config)
"""

from __future__ import annotations

from typing import Any

from promptgym.core.serialization import custom_object_scope, deserialize_object, serialize_object
from promptgym.knowledge_bases.duckdb_adapter import DuckDBAdapter
from promptgym.knowledge_bases.errors import KnowledgeBaseError, ReadOnlyKnowledgeBaseError
from promptgym.knowledge_bases.knowledge_base import KnowledgeBase
from promptgym.knowledge_bases.lancedb_adapter import LanceDBAdapter
from promptgym.modules.knowledge.read_only import read_only_knowledge_bases

_DEFAULT: list[Any] = []


def serialize(knowledge_base: KnowledgeBase) -> dict[str, Any]:
    return serialize_object(knowledge_base)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> KnowledgeBase:
    config = dict(config)
    if str(config.get("class_name", "")).lower() == "knowledgebase":
        config["class_name"] = "KnowledgeBase"
    with custom_object_scope(custom_objects or {}):
        return deserialize_object(config, expected="knowledge base")


def get(identifier: Any) -> KnowledgeBase:
    """A KnowledgeBase from an instance, a ``duckdb://`` URI or path, a config dict, or None (the default one)."""
    if isinstance(identifier, KnowledgeBase):
        return identifier
    if identifier is None:
        return _DEFAULT[0] if _DEFAULT else KnowledgeBase()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier.startswith("ladybug"):
            raise NotImplementedError(f"{identifier!r}: promptgym has no graph store yet (DuckDB tables only)")
        return KnowledgeBase(uri=identifier)
    raise TypeError(f"a knowledge base is a KnowledgeBase, a duckdb:// URI or a config dict, got {identifier!r:.80}")


def set_default_knowledge_base(knowledge_base: Any) -> None:
    """The knowledge base ``get(None)`` returns (synalinks' ``set_default_knowledge_base``)."""
    _DEFAULT[:] = [get(knowledge_base)]


def default_knowledge_base() -> KnowledgeBase | None:
    return _DEFAULT[0] if _DEFAULT else None


__all__ = ["DuckDBAdapter", "KnowledgeBase", "KnowledgeBaseError", "LanceDBAdapter", "ReadOnlyKnowledgeBaseError", "default_knowledge_base",
           "deserialize", "get", "read_only_knowledge_bases", "serialize", "set_default_knowledge_base"]
