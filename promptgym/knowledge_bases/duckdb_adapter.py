"""``DuckDBAdapter``: DataModels in DuckDB tables, with BM25, vector, regex and hybrid search.

One file holds the rows, the BM25 index (DuckDB's ``fts``) and the vectors
(a ``FLOAT[d]`` column, searched exactly). The adapter is the public face of
small modules: ``connection`` (one shared, offline connection per file),
``tables`` (DDL and schema checks), ``writes``, ``bulk_load``, ``fulltext``,
``vector_search``, ``regex_search``, ``hybrid`` (rank fusion) and ``filters``
(filters -> SQL). Coroutines may call it concurrently: each statement runs
in a worker thread under the connection's lock, so the event loop stays
free, and every write is one transaction (a kill mid-write loses that write
only, never a committed one).

    adapter = DuckDBAdapter(uri="duckdb://./kb.db", data_models=[Document])
    await adapter.update(Document(id="1", text="hello").to_json_data_model())
    rows = await adapter.fulltext_search("hello", table_name="Document")
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import duckdb
import pyarrow as pa

from promptgym.core.base_models import EmbeddingRequest
from promptgym.core.json_data_model import JsonDataModel
from promptgym.knowledge_bases import bulk_load, hybrid
from promptgym.knowledge_bases.columns import VECTOR_KEY
from promptgym.knowledge_bases.connection import resolve_path
from promptgym.knowledge_bases.errors import KnowledgeBaseError
from promptgym.knowledge_bases.fulltext import STEMMERS, FulltextSettings, fulltext_rows, refresh_index
from promptgym.knowledge_bases.naming import table_identifier
from promptgym.knowledge_bases.regex_search import regex_rows
from promptgym.knowledge_bases.results import format_search_results, minmax_normalize_scores
from promptgym.knowledge_bases.tables import GIVEN_VECTORS, TableStore
from promptgym.knowledge_bases.vector_search import METRICS, query_vectors, similarity_rows
from promptgym.knowledge_bases.writes import as_json_data_model, delete_keys, group_records, text_to_embed, write_rows
from promptgym.modules.symbolic import SymbolicDataModel

__all__ = ["DuckDBAdapter", "KnowledgeBaseError", "describe_embedding_model", "resolve_path"]


def describe_embedding_model(model: Any) -> str:
    """What a table records about the model that embedded it (class and model string, no secrets)."""
    return f"{type(model).__name__}({getattr(model, 'model', '?')})"


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


async def embed_texts_with(embedding_model: Any, texts: list[str]) -> list[list[float]]:
    """The vectors ``embedding_model`` gives ``texts``, as stored (a Ray worker embeds with this too: same values)."""
    result = await embedding_model(EmbeddingRequest(texts=texts))
    vectors = result.get("embeddings") if result is not None else None
    if not vectors or len(vectors) != len(texts):
        raise KnowledgeBaseError(f"embedding model {describe_embedding_model(embedding_model)} returned "
                                 f"{len(vectors or [])} vectors for {len(texts)} texts")
    return [list(map(float, vector)) for vector in vectors]


class DuckDBAdapter:
    """The SQL store of a :class:`~promptgym.knowledge_bases.KnowledgeBase` (synalinks' DuckDB adapter).

    Args:
        uri: ``"duckdb://path.db"``, a plain path, or ``":memory:"``; None puts ``database.db`` in synalinks_home.
        embedding_model: embeds records that arrive without an ``embedding`` and the text of vector queries.
        data_models: DataModel classes (or symbolic data models); one table each, named by the schema title.
        stemmer, stopwords, ignore, strip_accents, lower: the BM25 index's text processing (DuckDB's ``fts``).
        metric: ``"cosine"`` (default), ``"l2sq"`` or ``"ip"``.
        wipe_on_start: drop every table first.
        encryption_key: encrypt the file at rest (never stored, logged or serialized).
        read_only: open an existing file for reading only (many processes may then share it).
    """

    # The engine's pieces: the LanceDB adapter swaps these for its own and shares everything else.
    _write_rows = staticmethod(write_rows)
    _delete_keys = staticmethod(delete_keys)
    _load_rows = staticmethod(bulk_load.load_rows)
    _fulltext_rows = staticmethod(fulltext_rows)
    _similarity_rows = staticmethod(similarity_rows)
    _refresh_index = staticmethod(refresh_index)

    def __init__(self, uri: str | None = None, embedding_model: Any = None, data_models: Any = None,
                 stemmer: str = "porter", stopwords: str | None = None, ignore: str | None = None,
                 strip_accents: bool | None = None, lower: bool | None = None, metric: str = "cosine",
                 vss_key: str = VECTOR_KEY, vector_dim: int | None = None, wipe_on_start: bool = False,
                 name: str | None = None, encryption_key: str | None = None, read_only: bool = False,
                 **_: Any) -> None:
        if stemmer not in STEMMERS:
            raise ValueError(f"`stemmer` parameter should be one of {list(STEMMERS)}, got {stemmer!r}")
        if metric not in METRICS:
            raise ValueError(f"`metric` parameter should be one of {list(METRICS)}, got {metric!r}")
        self.uri = self.resolve_uri(uri, name)
        self.embedding_model = embedding_model
        self.stemmer, self.stopwords, self.ignore = stemmer, stopwords, ignore
        self.strip_accents, self.lower = strip_accents, lower
        self.metric = metric
        self.vss_key = vss_key
        self.vector_dim = vector_dim
        self.read_only = read_only
        self.data_models: dict[str, Any] = {}
        self._store = self._open_store(encryption_key)
        if wipe_on_start:
            self.wipe_database()
        for data_model in data_models or []:
            schema = data_model.get_schema()
            if not schema.get("title"):
                raise ValueError("Each registered data model must carry a schema `title`; got a schema with no title.")
            table = table_identifier(schema["title"])
            self.data_models[table] = data_model
            self._store.locked(self._store.ensure_table, table, schema)

    @staticmethod
    def resolve_uri(uri: str | None, name: str | None) -> str:
        """Where ``uri`` (or, without one, ``name``) keeps this adapter's store on disk."""
        return resolve_path(uri, name)

    def _open_store(self, encryption_key: str | None) -> TableStore:
        return TableStore(self.uri, vss_key=self.vss_key, read_only=self.read_only, encryption_key=encryption_key)

    def close(self) -> None:
        """Stop using the connection (idempotent); the last user of the file closes it."""
        self._store.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def _embedder(self) -> str:
        """What makes this adapter's vectors, as a table records it."""
        return describe_embedding_model(self.embedding_model) if self.embedding_model is not None else GIVEN_VECTORS

    def _fulltext_settings(self) -> FulltextSettings:
        return FulltextSettings(self.stemmer, self.stopwords, self.ignore, self.strip_accents, self.lower)

    def _id_key(self, table_name: str) -> Any:
        store = self._store
        return store.call(lambda: store.require_columns(table_identifier(table_name))[0][0])

    # -- tables ----------------------------------------------------------------------------

    def wipe_database(self) -> None:
        """Drop every table (and its index)."""
        self._store.locked(self._store.wipe)

    def get_symbolic_data_models(self, remove_embedding: bool = True) -> list[SymbolicDataModel]:
        """One SymbolicDataModel per table, read from the database."""
        store = self._store
        return store.locked(lambda: [
            SymbolicDataModel(schema=store.table_schema(table, self.data_models.get(table), remove_embedding),
                              name=table) for table in store.tables()])

    async def drop_table(self, table_name: str) -> bool:
        """Drop a table and its index; False when there was none."""
        self._store.write_guard()
        table = table_identifier(table_name)
        dropped = await self._store.call(self._store.drop, table)
        self.data_models.pop(table, None)
        return dropped

    async def rename(self, source: Any, *, table_name: str | None = None,
                     table_description: str | None = None) -> SymbolicDataModel:
        """Rename a table and/or set its description; the table's SymbolicDataModel afterwards."""
        if table_name is None and table_description is None:
            raise ValueError("rename(): pass at least one of `table_name=` or `table_description=`.")
        old_title = source if isinstance(source, str) else source.get_schema().get("title")
        if not old_title:
            raise ValueError("rename(): source SymbolicDataModel has no schema title; cannot determine the table.")
        old = table_identifier(old_title)
        new = table_identifier(table_name) if table_name is not None else old
        store = self._store

        def run() -> dict[str, Any]:
            if not store.columns(old):
                raise ValueError(f"rename(): no table named {old!r} found in the knowledge base.")
            if new != old:
                store.rename(old, new)
            return store.table_schema(new, self.data_models.get(new))

        schema = await store.call(run)
        description = table_description
        if description is None and not isinstance(source, str):
            description = source.get_schema().get("description")
        if description is not None:
            schema["description"] = description
        model = SymbolicDataModel(schema=schema, name=new)
        self.data_models.pop(old, None)
        self.data_models[new] = model
        return model

    # -- writing ---------------------------------------------------------------------------

    async def update(self, data_model_or_data_models: Any) -> Any:
        """Insert or replace records by primary key (their first field); their key(s), scalar in -> scalar out."""
        single = not isinstance(data_model_or_data_models, (list, tuple))
        records = [as_json_data_model(item) for item in _as_list(data_model_or_data_models)]
        if not records:
            return []
        self._store.write_guard()
        by_table, ids = group_records(records, self.vss_key)
        if self.embedding_model is not None:
            pending = [(schema, values) for rows in by_table.values() for schema, values in rows
                       if values.get(self.vss_key) is None]
            if pending:
                vectors = await self._embed([text_to_embed(values, schema, self.vss_key) for schema, values in pending])
                for (_, values), vector in zip(pending, vectors):
                    values[self.vss_key] = vector
        await self._store.call(self._write_rows, self._store, by_table, self._embedder)
        return ids[0] if single else ids

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        return await embed_texts_with(self.embedding_model, texts)

    async def delete(self, id_or_ids: Any, *, table_name: str) -> int:
        """Delete records by key; how many were there. A missing table warns and deletes nothing."""
        ids = _as_list(id_or_ids)
        if not ids:
            return 0
        self._store.write_guard()
        table = table_identifier(table_name)
        if not await self._store.call(self._store.columns, table):
            warnings.warn(f"delete(): no table named '{table}'; nothing to delete.", stacklevel=2)
            return 0
        return await self._store.call(self._delete_keys, self._store, table, ids)

    # -- what ingestion needs --------------------------------------------------------------

    async def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Vectors for ``texts`` from the knowledge base's embedding model (one batched call)."""
        if self.embedding_model is None:
            raise ValueError("this knowledge base has no embedding_model")
        return await self._embed(texts)

    async def existing_ids(self, ids: list[Any], *, table_name: str) -> set[Any]:
        """Which of these keys the table already holds (none when it does not exist yet)."""
        table = table_identifier(table_name)
        store = self._store

        return await store.call(lambda: store.existing_keys(table, list(ids)) if store.columns(table) and ids
                                else set())

    async def refresh_fulltext_index(self, *, table_name: str) -> bool:
        """Build the table's BM25 index now if writes made it stale (so read-only readers search every row)."""
        store = self._store
        table = table_identifier(table_name)
        return await store.call(lambda: bool(store.columns(table)) and
                                self._refresh_index(store, table, store.columns(table), self._fulltext_settings()))

    async def delete_others(self, keep: list[Any], *, table_name: str, where: dict[str, Any]) -> int:
        """Delete the records matching ``where`` whose key is not in ``keep`` (a re-ingested file's old chunks)."""
        self._store.write_guard()
        return await self._store.call(self._delete_keys, self._store, table_identifier(table_name), list(keep), where, True)

    def get_setting(self, key: str) -> str | None:
        """A value the knowledge base keeps about itself (the CLI's embedding model, chunk size...)."""
        return self._store.locked(self._store.get_setting, key)

    def set_setting(self, key: str, value: str) -> None:
        self._store.locked(self._store.set_setting, key, value)

    def table_info(self) -> list[dict[str, Any]]:
        """Per table: name, rows, fields, vector dimension and the model that embedded it."""
        return self._store.locked(self._store.table_info)

    # -- bulk loading ----------------------------------------------------------------------

    async def from_csv(self, path: str, *, table_name: str | None = None, table_description: str | None = None,
                       delimiter: str = ",", encoding: str = "utf-8", header: bool = True) -> SymbolicDataModel:
        """Load a CSV file into a table (created from its columns, first column the key; rows upserted)."""
        return await self._bulk_load(path, table_name, table_description,
                                     bulk_load.csv_reader(delimiter, encoding, header))

    async def from_parquet(self, path: str, *, table_name: str | None = None,
                           table_description: str | None = None) -> SymbolicDataModel:
        return await self._bulk_load(path, table_name, table_description, bulk_load.PARQUET)

    async def from_json(self, path: str, *, table_name: str | None = None,
                        table_description: str | None = None) -> SymbolicDataModel:
        """Load a JSON file holding an array of objects."""
        return await self._bulk_load(path, table_name, table_description, bulk_load.JSON_ARRAY)

    async def from_jsonl(self, path: str, *, table_name: str | None = None,
                         table_description: str | None = None) -> SymbolicDataModel:
        """Load a JSON Lines file (one object per line)."""
        return await self._bulk_load(path, table_name, table_description, bulk_load.JSON_LINES)

    async def _bulk_load(self, path: str, table_name: str | None, description: str | None,
                         reader: str) -> SymbolicDataModel:
        table = bulk_load.target_table(path, table_name)
        self._store.write_guard()
        batch, columns = await asyncio.to_thread(bulk_load.read_file, path, reader)
        await self._store.call(self._load_rows, self._store, table, path, batch, columns)
        schema = await self._store.call(self._store.table_schema, table, self.data_models.get(table))
        if description is not None:
            schema["description"] = description
        model = SymbolicDataModel(schema=schema, name=table)
        self.data_models.setdefault(table, model)
        return model

    # -- reading ---------------------------------------------------------------------------

    async def get(self, id_or_ids: Any, *, table_name: str, remove_embedding: bool = True) -> Any:
        """The record(s) with these key(s): None where there is none; scalar in -> scalar out."""
        single = not isinstance(id_or_ids, (list, tuple))
        ids = _as_list(id_or_ids)
        if not ids:
            return None if single else []
        table = table_identifier(table_name)
        store = self._store

        def run() -> list[JsonDataModel | None]:
            columns = store.columns(table)
            if not columns:
                warnings.warn(f"get(): no table named '{table}'.", stacklevel=3)
                return [None] * len(ids)
            rows = store.rows_with_keys(table, ids, remove_embedding)
            found = {record.get(columns[0][0]): record
                     for record in store.records(table, rows, self.data_models.get(table))}
            return [found.get(key) for key in ids]

        results = await store.call(run)
        return results[0] if single else results

    async def getall(self, *, table_name: str, limit: int = 50, offset: int = 0, remove_embedding: bool = True,
                     filters: dict[str, Any] | None = None) -> list[JsonDataModel]:
        """Records of a table in key order, paginated (``filters``: field -> value or list of values)."""
        table = table_identifier(table_name)
        store = self._store

        def run() -> list[JsonDataModel]:
            columns = store.columns(table)
            if not columns:
                warnings.warn(f"Failed to read table '{table}': it does not exist.", stacklevel=3)
                return []
            rows = store.page(table, filters, limit, offset, remove_embedding)
            return store.records(table, rows, self.data_models.get(table))

        return await store.call(run)

    async def count(self, *, table_name: str) -> int:
        """How many records a table holds (0 when it does not exist)."""
        return await self._store.call(self._store.count, table_identifier(table_name))

    async def sql(self, sql: str, *, params: Any = None, read_only: bool = True, output_format: str = "json",
                  **_: Any) -> Any:
        """Run SQL; ``read_only=True`` (default) accepts SELECT statements only. The connection never reads files."""
        if read_only:
            _require_select(sql)
        else:
            self._store.write_guard()
        store = self._store

        def run() -> pa.Table:
            result = store.connection().execute(sql, params or []).arrow().read_all()
            if not read_only:  # it may have changed tables or written rows
                store.schema_changed()
            return result

        return format_search_results(await store.call(run), output_format)

    # -- search ----------------------------------------------------------------------------

    async def fulltext_search(self, text_or_texts: Any, *, table_name: str, k: int = 10,
                              threshold: float | None = None, conjunctive: bool = False,
                              bm25_b: float | None = None, bm25_k: float | None = None, output_format: str = "json",
                              filters: dict[str, Any] | None = None) -> Any:
        """BM25 search; ``score`` is rescaled to [0, 1] over the results (best 1.0), ``threshold`` on that scale."""
        if not text_or_texts:
            return format_search_results([], output_format)
        table = table_identifier(table_name)
        found = await self._store.call(
            lambda: self._fulltext_rows(self._store, table, _as_list(text_or_texts), self._fulltext_settings(), k,
                                  conjunctive=conjunctive, bm25_b=bm25_b, bm25_k=bm25_k, filters=filters))
        if found is None:
            warnings.warn(f"Skipping FTS search for {table}: no text columns to index.", stacklevel=2)
            found = []
        ranked = minmax_normalize_scores(found)
        if threshold is not None:
            ranked = [row for row in ranked if row["score"] >= threshold]
        return format_search_results(ranked, output_format)

    async def _vectors_for(self, text_or_texts: Any, vector_or_vectors: Any, what: str) -> list[list[float]] | None:
        vectors = query_vectors(vector_or_vectors)
        if vectors is not None:
            return vectors
        if not text_or_texts:
            return None
        if self.embedding_model is None:
            raise ValueError(f"{what} requires an embedding model on the knowledge base, or pass `vector_or_vectors=`.")
        return await self._embed([str(text) for text in _as_list(text_or_texts)])

    async def similarity_search(self, text_or_texts: Any = None, *, table_name: str, vector_or_vectors: Any = None,
                                k: int = 10, threshold: float | None = None, ef_search: int | None = None,
                                output_format: str = "json", filters: dict[str, Any] | None = None) -> Any:
        """Nearest records by vector (exact search); ``score`` is the distance (lower is closer)."""
        vectors = await self._vectors_for(text_or_texts, vector_or_vectors, "similarity_search")
        if not vectors:
            return format_search_results([], output_format)
        table = table_identifier(table_name)
        found = await self._store.call(
            lambda: self._similarity_rows(self._store, table, vectors, self.metric, k, embedder=self._embedder,
                                    threshold=threshold, filters=filters))
        return format_search_results(found, output_format)

    async def regex_search(self, pattern: str, *, table_name: str, fields: list[str] | None = None,
                           case_sensitive: bool = True, k: int = 10, output_format: str = "json",
                           filters: dict[str, Any] | None = None) -> Any:
        """Records whose string fields match an RE2 pattern (linear time, so an LM's pattern is safe)."""
        if not pattern:
            return format_search_results([], output_format)
        found = await self._store.call(regex_rows, self._store, table_identifier(table_name), pattern, fields,
                                       case_sensitive, k, filters)
        return format_search_results(found, output_format)

    async def hybrid_fts_search(self, text_or_texts: Any = None, *, keywords: Any = None, table_name: str,
                                vector_or_vectors: Any = None, k: int = 10, k_rank: int = 60,
                                similarity_threshold: float | None = None, fulltext_threshold: float | None = None,
                                ef_search: int | None = None, conjunctive: bool = False,
                                bm25_b: float | None = None, bm25_k: float | None = None,
                                output_format: str = "json", filters: dict[str, Any] | None = None) -> Any:
        """BM25 and vector rankings fused by Reciprocal Rank Fusion (BM25 alone without an embedder or vectors)."""
        vectors = query_vectors(vector_or_vectors)
        if not text_or_texts and vectors is None and not keywords:
            return format_search_results([], output_format)
        bm25 = {"conjunctive": conjunctive, "bm25_b": bm25_b, "bm25_k": bm25_k}
        if vectors is None and (not text_or_texts or self.embedding_model is None):
            rows = await self.fulltext_search(keywords if keywords is not None else text_or_texts,
                                              table_name=table_name, k=k, threshold=fulltext_threshold,
                                              filters=filters, **bm25)
            for row in rows:
                row.setdefault("fulltext_score", row["score"])
            return format_search_results(rows, output_format)
        if vectors is None:
            vectors = await self._vectors_for(text_or_texts, None, "hybrid_fts_search")
        assert vectors is not None
        words = _as_list(keywords) if keywords is not None else \
            ([str(text) for text in _as_list(text_or_texts)] if vector_or_vectors is None else [None] * len(vectors))
        ranked = await hybrid.hybrid_fts(self, words, vectors, table_name=table_name,
                                         id_key=await self._id_key(table_name), k=k, k_rank=k_rank,
                                         similarity_threshold=similarity_threshold,
                                         fulltext_threshold=fulltext_threshold, bm25=bm25, filters=filters)
        return format_search_results(ranked, output_format)

    async def hybrid_search(self, *args: Any, **kwargs: Any) -> Any:
        """synalinks' older name of :meth:`hybrid_fts_search`."""
        return await self.hybrid_fts_search(*args, **kwargs)

    async def hybrid_regex_search(self, text_or_texts: Any = None, *, pattern_or_patterns: Any = None,
                                  table_name: str, vector_or_vectors: Any = None, k: int = 10, k_rank: int = 60,
                                  similarity_threshold: float | None = None, ef_search: int | None = None,
                                  fields: list[str] | None = None, case_sensitive: bool = True,
                                  output_format: str = "json", filters: dict[str, Any] | None = None) -> Any:
        """Vector and regex rankings fused by RRF (regex alone without an embedder or vectors)."""
        patterns = [pattern for pattern in _as_list(pattern_or_patterns) if pattern] if pattern_or_patterns else []
        vectors = query_vectors(vector_or_vectors)
        if vectors is None and text_or_texts and self.embedding_model is not None:
            vectors = await self._vectors_for(text_or_texts, None, "hybrid_regex_search")
        id_key = await self._id_key(table_name)
        matches = await hybrid.regex_matches(self, patterns, table_name=table_name, id_key=id_key, k=k, fields=fields,
                                             case_sensitive=case_sensitive, filters=filters)
        if not vectors:
            return format_search_results(matches[:k], output_format)
        ranked = await hybrid.hybrid_regex(self, matches, vectors, table_name=table_name, id_key=id_key, k=k,
                                           k_rank=k_rank, similarity_threshold=similarity_threshold, filters=filters)
        return format_search_results(ranked, output_format)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} uri={self.uri}>"


def _require_select(sql: str) -> None:
    """``read_only=True`` SQL: SELECT statements only (an LM wrote it)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise duckdb.InvalidInputException(f"Invalid SQL: {error}") from error
    if not statements:
        raise duckdb.InvalidInputException("Empty SQL query.")
    for statement in statements:
        if statement.type != duckdb.StatementType.SELECT:
            raise duckdb.InvalidInputException(
                f"read_only=True only permits SELECT statements; got {statement.type.name}.")
