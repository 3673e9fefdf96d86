"""``KnowledgeBase``: synalinks' knowledge base, on DuckDB (or LanceDB past one file), embedded and offline.

    import promptgym as synalinks

    class Document(synalinks.DataModel):
        id: str
        text: str

    kb = synalinks.KnowledgeBase(uri="duckdb://./docs.db", data_models=[Document],
                                 embedding_model=synalinks.EmbeddingModel("local/multilingual-e5-small"))
    await kb.update(Document(id="1", text="Paris is the capital of France").to_json_data_model())
    rows = await kb.hybrid_fts_search("capital of France", table_name="Document", k=3)

The first declared field of a DataModel is its primary key; ``update`` is an
upsert. A record that arrives without an ``embedding`` is embedded on the way
in when the knowledge base has an embedding model. The graph store of
synalinks (entities, relations, Cypher) is not implemented: those methods
raise NotImplementedError.
"""

from __future__ import annotations

import sys
from typing import Any

from promptgym.core.serialization import deserialize_object, register_builtin, serialize_object
from promptgym.embedding_models import get as get_embedding_model
from promptgym.knowledge_bases.duckdb_adapter import DuckDBAdapter
from promptgym.knowledge_bases.lancedb_adapter import LanceDBAdapter, is_lancedb_uri
from promptgym.knowledge_bases.results import format_search_results
from promptgym.modules.knowledge.read_only import opening_read_only
from promptgym.modules.naming import unique_name
from promptgym.modules.symbolic import SymbolicDataModel

_GRAPH_METHODS = ("update_entities", "update_relations", "update_knowledge_graph", "get_entity", "delete_entity",
                  "delete_relation", "cypher", "entity_similarity_search", "entity_fulltext_search",
                  "entity_regex_search", "entity_hybrid_regex_search", "entity_hybrid_fts_search",
                  "relation_similarity_search", "relation_fulltext_search", "relation_regex_search",
                  "relation_hybrid_regex_search", "relation_hybrid_fts_search", "path_hybrid_fts_search",
                  "path_similarity_search", "path_fulltext_search", "path_regex_search", "path_hybrid_regex_search",
                  "get_symbolic_entities", "get_symbolic_relations", "detect_communities", "pagerank",
                  "local_graph_search", "build_communities", "global_graph_search", "community_graph_search")


def _schema_config(model: Any) -> dict[str, Any]:
    """A data model as JSON: its (standardized) schema, so a DataModel class and its clone serialize alike."""
    return {"schema": SymbolicDataModel(schema=model.get_schema()).get_schema()}


def adapter_class(uri: str | None) -> type[DuckDBAdapter]:
    """The adapter a uri picks: ``lancedb://dir`` LanceDB; ``duckdb://``, plain paths and ``:memory:`` DuckDB.

    >>> adapter_class("lancedb://./kb").__name__, adapter_class("kb.db").__name__
    ('LanceDBAdapter', 'DuckDBAdapter')
    """
    return LanceDBAdapter if is_lancedb_uri(uri) else DuckDBAdapter


def _is_dataset(value: Any) -> bool:
    """A synalinks Dataset (iterable of batches, with an ``output_template``), duck-typed."""
    return hasattr(value, "output_template") and hasattr(value, "__iter__") and not isinstance(value, (list, tuple))


@register_builtin
class KnowledgeBase:
    """Records by primary key, with full-text (BM25), vector, regex and hybrid search, in one DuckDB file.

    Args:
        uri: ``"duckdb://path.db"`` (or a plain path, or ``":memory:"``); None puts ``<name or database>.db`` under
            synalinks_home. ``"lancedb://dir"`` stores the tables in a LanceDB directory instead (the ``lancedb``
            extra), for knowledge bases that outgrow one DuckDB file.
        data_models: DataModel classes (or symbolic data models); one table each, named by the title.
        embedding_model: embeds records without an ``embedding`` and the text of vector queries.
        metric: ``"cosine"`` (default), ``"l2sq"`` or ``"ip"``.
        wipe_on_start: drop every table when opening.
        name: the knowledge base's name (and file stem when ``uri`` is None).
        encryption_key: encrypt the file (kept in the adapter only: never in ``get_config()`` or a repr).
        read_only: open an existing file for reading only (a server's many workers can share it).
        graph_uri, entity_models, relation_models: synalinks' graph store; kept for its configs, not implemented.
    """

    def __init__(self, *, uri: str | None = None, graph_uri: str | None = None, data_models: Any = None,
                 entity_models: Any = None, relation_models: Any = None, embedding_model: Any = None,
                 metric: str = "cosine", wipe_on_start: bool = False, name: str | None = None,
                 encryption_key: str | None = None, **kwargs: Any) -> None:
        if isinstance(embedding_model, (str, dict)):  # a model string, or a saved program's config
            embedding_model = get_embedding_model(embedding_model)
        self.uri = uri
        self.graph_uri = graph_uri
        self.data_models = list(data_models or [])
        self.entity_models = list(entity_models or [])
        self.relation_models = list(relation_models or [])
        self.embedding_model = embedding_model
        self.metric = metric
        self.wipe_on_start = wipe_on_start
        self.name = name or unique_name("knowledge_base")
        self.read_only = bool(kwargs.get("read_only", False))
        self.sql_adapter: DuckDBAdapter | None = None
        self.graph_adapter = None
        if uri is not None or graph_uri is None:
            self.sql_adapter = adapter_class(uri)(uri=uri, data_models=self.data_models, embedding_model=embedding_model,
                                             metric=metric, wipe_on_start=wipe_on_start, name=name,
                                             encryption_key=encryption_key, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in _GRAPH_METHODS:
            raise NotImplementedError(f"Graph operations require a graph database adapter (KnowledgeBase.{name}): "
                                      "promptgym has no graph store (entities, relations, Cypher) yet; it stores "
                                      "DataModels in DuckDB tables")
        raise AttributeError(f"'KnowledgeBase' object has no attribute {name!r}")

    @property
    def adapter(self) -> DuckDBAdapter:
        if self.sql_adapter is None:
            raise NotImplementedError("this knowledge base has only a graph_uri: promptgym has no graph store yet")
        return self.sql_adapter

    # -- records ---------------------------------------------------------------------------

    async def update(self, data_model_or_data_models: Any, *, verbose: Any = "auto") -> Any:
        """Insert or replace records (a DataModel, a JsonDataModel, a list, or an inputs-only Dataset)."""
        if _is_dataset(data_model_or_data_models):
            return await self._update_from_dataset(data_model_or_data_models, verbose=verbose)
        return await self.adapter.update(data_model_or_data_models)

    async def _update_from_dataset(self, dataset: Any, *, verbose: Any = "auto") -> list[Any]:
        if dataset.output_template is not None:
            raise ValueError("KnowledgeBase.update accepts only inputs-only datasets (no `output_template`). The "
                             "knowledge base stores records, not (input, target) pairs.")
        verbose = 1 if verbose == "auto" else verbose
        ids: list[Any] = []
        for step, batch in enumerate(dataset, start=1):
            inputs = batch[0] if isinstance(batch, tuple) else batch
            if len(inputs) == 0:
                continue
            added = await self.adapter.update(list(inputs))
            ids += added if isinstance(added, list) else [added]
            if verbose:
                print(f"{step} batch - rows: {len(ids)}", file=sys.stdout, flush=True)
        return ids

    async def get(self, id_or_ids: Any, *, table_name: str, **kwargs: Any) -> Any:
        """The record(s) with these key(s) (None where absent)."""
        return await self.adapter.get(id_or_ids, table_name=table_name, **kwargs)

    async def getall(self, *, table_name: str, limit: int = 50, offset: int = 0, **kwargs: Any) -> list[Any]:
        """A page of a table's records, in key order (``filters={"field": value}`` to select)."""
        return await self.adapter.getall(table_name=table_name, limit=limit, offset=offset, **kwargs)

    async def count(self, *, table_name: str) -> int:
        return await self.adapter.count(table_name=table_name)

    async def delete(self, id_or_ids: Any, *, table_name: str) -> int:
        """Delete by key; the number deleted."""
        return await self.adapter.delete(id_or_ids, table_name=table_name)

    async def drop_table(self, table_name: str) -> bool:
        return await self.adapter.drop_table(table_name)

    async def rename(self, source: Any, *, table_name: str | None = None, table_description: str | None = None) -> Any:
        return await self.adapter.rename(source, table_name=table_name, table_description=table_description)

    async def from_csv(self, path: str, *, table_name: str | None = None, table_description: str | None = None,
                       **kwargs: Any) -> Any:
        return await self.adapter.from_csv(path, table_name=table_name, table_description=table_description, **kwargs)

    async def from_parquet(self, path: str, *, table_name: str | None = None,
                           table_description: str | None = None) -> Any:
        return await self.adapter.from_parquet(path, table_name=table_name, table_description=table_description)

    async def from_json(self, path: str, *, table_name: str | None = None, table_description: str | None = None) -> Any:
        return await self.adapter.from_json(path, table_name=table_name, table_description=table_description)

    async def from_jsonl(self, path: str, *, table_name: str | None = None,
                         table_description: str | None = None) -> Any:
        return await self.adapter.from_jsonl(path, table_name=table_name, table_description=table_description)

    async def sql(self, sql: str, *, params: Any = None, output_format: str = "json", **kwargs: Any) -> Any:
        """Run SQL (SELECT only unless ``read_only=False``); rows as dicts, or CSV text."""
        return await self.adapter.sql(sql, params=params, output_format=output_format, **kwargs)

    query = sql  # synalinks' older name

    # -- search ----------------------------------------------------------------------------

    async def _search(self, method: str, query: Any, table_name: str | None, kwargs: dict[str, Any],
                      lower_is_better: bool = False) -> Any:
        """One table's search, or, with no ``table_name``, every table's merged by score."""
        search = getattr(self.adapter, method)
        if table_name is not None:
            return await search(query, table_name=table_name, **kwargs)
        tables = [model.get_schema()["title"] for model in self.get_symbolic_data_models()]
        output_format = kwargs.pop("output_format", "json")
        rows = [row for table in tables for row in await search(query, table_name=table, **kwargs)]
        if rows and "score" in rows[0]:
            rows.sort(key=lambda row: row["score"], reverse=not lower_is_better)
        return format_search_results(rows[: kwargs.get("k", 10)], output_format)

    async def similarity_search(self, text_or_texts: Any = None, *, table_name: str | None = None,
                                **kwargs: Any) -> Any:
        """Nearest records by embedding; ``score`` is the distance (every table when ``table_name`` is None)."""
        return await self._search("similarity_search", text_or_texts, table_name, kwargs, lower_is_better=True)

    async def fulltext_search(self, text_or_texts: Any, *, table_name: str | None = None, **kwargs: Any) -> Any:
        """BM25 search; ``score`` in [0, 1], best first (every table when ``table_name`` is None)."""
        return await self._search("fulltext_search", text_or_texts, table_name, kwargs)

    async def regex_search(self, pattern: str, *, table_name: str | None = None, **kwargs: Any) -> Any:
        """Records whose string fields match an RE2 pattern."""
        return await self._search("regex_search", pattern, table_name, kwargs)

    async def hybrid_fts_search(self, text_or_texts: Any = None, *, table_name: str | None = None,
                                **kwargs: Any) -> Any:
        """BM25 and vector search fused by Reciprocal Rank Fusion."""
        return await self._search("hybrid_fts_search", text_or_texts, table_name, kwargs)

    async def hybrid_search(self, text_or_texts: Any = None, *, table_name: str | None = None, **kwargs: Any) -> Any:
        """synalinks' older name of :meth:`hybrid_fts_search`."""
        return await self.hybrid_fts_search(text_or_texts, table_name=table_name, **kwargs)

    async def hybrid_regex_search(self, text_or_texts: Any = None, *, table_name: str | None = None,
                                  **kwargs: Any) -> Any:
        """Vector search and regex matches fused by Reciprocal Rank Fusion."""
        return await self._search("hybrid_regex_search", text_or_texts, table_name, kwargs)

    def get_symbolic_data_models(self) -> list[SymbolicDataModel]:
        """One SymbolicDataModel per table in the database."""
        return self.adapter.get_symbolic_data_models()

    def close(self) -> None:
        if self.sql_adapter is not None:
            self.sql_adapter.close()

    # -- serialization -----------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "data_models": [_schema_config(model) for model in self.data_models],
            "entity_models": [_schema_config(model) for model in self.entity_models],
            "relation_models": [_schema_config(model) for model in self.relation_models],
            "uri": self.uri, "graph_uri": self.graph_uri, "name": self.name, "metric": self.metric,
            "wipe_on_start": self.wipe_on_start,
        }
        if self.read_only:
            config["read_only"] = True
        if self.embedding_model is not None:
            config["embedding_model"] = serialize_object(self.embedding_model)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "KnowledgeBase":
        config = dict(config)
        for key in ("data_models", "entity_models", "relation_models"):
            config[key] = [SymbolicDataModel(schema=item["schema"]) if isinstance(item, dict) and "schema" in item
                           else deserialize_object(item, expected="data model") for item in config.get(key) or []]
        if isinstance(config.get("embedding_model"), dict):
            config["embedding_model"] = deserialize_object(config["embedding_model"], expected="embedding model")
        if opening_read_only():  # a served program's: see promptgym serve
            config.update(read_only=True, wipe_on_start=False)
        return cls(**config)

    def __repr__(self) -> str:
        return f"<KnowledgeBase name={self.name!r} uri={self.uri!r}>"
