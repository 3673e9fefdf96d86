"""The query-side embedder of a retriever: which model embeds its search terms, as a variable's JSON value.

``{"model": None}`` (the default) embeds queries with the knowledge base's own embedding model; a model string
(``"local/ft-e5-1a2b3c4d5e6f"``, a tuned e5 that ``EmbedderTuning`` writes) embeds them with that model
instead. Only queries change: the documents keep the vectors they were indexed with, so nothing is
re-embedded, and the model must give vectors of the knowledge base's dimension. The value is a string, so
loading a program runs no code.

>>> check_query_embedder({"model": "local/ft-e5-1a2b3c4d5e6f", "recall_after": {"3": 0.9}}) is None
True
>>> check_query_embedder({"model": 3})
"query_embedder.model must be an embedding model string (such as 'local/ft-e5-...') or null, got int 3"
"""

from __future__ import annotations

from typing import Any

from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.errors import UnknownModelError
from promptgym.lm.model_string import parse_model_string

BASE: dict[str, Any] = {"model": None}
"""The value while the knowledge base's own embedder embeds the queries."""


def embedder_value(model: str, **notes: Any) -> dict[str, Any]:
    """The variable's value naming ``model``, with JSON ``notes`` beside it (recall before/after, rows...)."""
    return {**notes, "model": model}


def check_query_embedder(value: Any) -> str | None:
    """What is wrong with a value (the variable refuses it), or None."""
    if not isinstance(value, dict) or "model" not in value:
        return f"query_embedder must be an object with a 'model' key (null: the knowledge base's own), got {value!r:.80}"
    model = value["model"]
    if model is None:
        return None
    if not isinstance(model, str) or not model.strip():
        return ("query_embedder.model must be an embedding model string (such as 'local/ft-e5-...') or null, got "
                f"{type(model).__name__} {model!r:.60}")
    try:
        parse_model_string(model)
    except (ValueError, UnknownModelError) as error:
        return f"query_embedder.model {model!r}: {error}"
    return None


class QueryEmbedders:
    """The embedding models a retriever's ``query_embedder`` has named: each built, and checked against the
    knowledge base's dimension, once."""

    def __init__(self) -> None:
        self.models: dict[str, EmbeddingModel] = {}
        self.checked: set[tuple[str, tuple[str, ...]]] = set()

    async def embed(self, model: str, terms: list[str], knowledge_base: Any, tables: list[str]) -> list[list[float]]:
        """``terms`` embedded by ``model``; a ValueError naming both dimensions when they are not the tables'."""
        if model not in self.models:
            self.models[model] = EmbeddingModel(model=model)
        vectors = await self.models[model](terms)
        if (model, tuple(tables)) not in self.checked:
            dimension = int(vectors.shape[1])
            stored = table_dimensions(knowledge_base, tables)
            wrong = {table: size for table, size in stored.items() if size != dimension}
            if wrong:
                uri = getattr(knowledge_base.adapter, "uri", "the knowledge base")
                raise ValueError(f"query_embedder {model} gives {dimension}-dimensional vectors but knowledge base "
                                 f"{uri} stores " + ", ".join(f"{size}-dimensional ones in {table!r}"
                                                              for table, size in wrong.items())
                                 + ": name an embedder of the knowledge base's dimension, or null")
            self.checked.add((model, tuple(tables)))
        return [[float(x) for x in vector] for vector in vectors]


def table_dimensions(knowledge_base: Any, tables: list[str]) -> dict[str, int]:
    """The vector dimension each of ``tables`` stores (tables without vectors left out)."""
    wanted = {table.lower() for table in tables}
    return {info["table"]: int(info["dimension"]) for info in knowledge_base.adapter.table_info()
            if info.get("dimension") and str(info["table"]).lower() in wanted}
