"""``DuckDBAdapter``: DataModels in DuckDB tables, with BM25, vector, regex and hybrid search.

One file holds the rows, the BM25 index (DuckDB's ``fts``) and the vectors
(a ``FLOAT[d]`` column, searched exactly). The adapter owns one connection
and a lock: coroutines may call it concurrently, each statement runs in a
worker thread so the event loop stays free, and every write is one
transaction (a kill mid-write loses that write only, never a committed one).

The BM25 index is rebuilt lazily: a write marks the table stale (in the same
transaction) and the next full-text search rebuilds it once, so ingesting
in many small batches costs one rebuild, not one per batch.

    adapter = DuckDBAdapter(uri="duckdb://./kb.db", data_models=[Document])
    await adapter.update(Document(id="1", text="hello").to_json_data_model())
    rows = await adapter.fulltext_search("hello", table_name="Document")
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import duckdb
import numpy as np
import pyarrow as pa

from promptgym.lm.traces import promptgym_home as synalinks_home
from promptgym.core.base_models import EmbeddingRequest
from promptgym.core.json_data_model import JsonDataModel
from promptgym.knowledge_bases import extensions
from promptgym.knowledge_bases.columns import (
    VECTOR_KEY,
    columns_for_schema,
    from_column_value,
    schema_for_columns,
    to_column_value,
)
from promptgym.knowledge_bases.naming import (
    column_identifier,
    q,
    sanitize_identifier,
    table_identifier,
    to_pascal_case,
)
from promptgym.knowledge_bases.results import (
    format_search_results,
    minmax_normalize_scores,
    reciprocal_rank_fusion,
)
from promptgym.modules.symbolic import SymbolicDataModel

T = TypeVar("T")

STEMMERS = ("arabic", "basque", "catalan", "danish", "dutch", "english", "finnish", "french", "german", "greek",
            "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian", "porter",
            "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish", "none")
METRICS = ("l2sq", "cosine", "ip")
_DISTANCE = {"l2sq": "array_distance", "cosine": "array_cosine_distance", "ip": "array_negative_inner_product"}
META = "promptgym_kb"
"""The schema of the adapter's own bookkeeping (kept out of ``main`` so it never shows as a user table)."""


@dataclass
class _Shared:
    """One connection per database file per process, shared by every adapter on it, with its lock.

    DuckDB gives two connections to one file in one process the same database
    underneath, but a key deleted through one and re-inserted through the
    other then fails as a duplicate (seen on 1.4.4): sharing one connection
    avoids that, and serializes all of the process's writes to the file.
    """

    con: duckdb.DuckDBPyConnection
    lock: threading.RLock
    users: int = 0
    columns: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Each table's (column, type) list: information_schema costs milliseconds a query. Cleared on any DDL."""
    fresh_fulltext: set[str] = field(default_factory=set)
    """Tables whose BM25 index is known to be up to date (so a search skips asking the database)."""
    vectors: dict[str, "VectorMatrix"] = field(default_factory=dict)
    """Each table's vectors in memory for unfiltered vector search; dropped when the table is written."""


@dataclass
class VectorMatrix:
    """A table's keys and vectors as a float32 matrix: one matrix product per query instead of a scan of the file.

    On the shared 2-core machine a vector search over 100,000 rows took about 0.7 s as DuckDB scanned the
    file's FLOAT[384] column; with the matrix in memory it took 75 ms under a heavier load (docs/benchmarks.md).
    """

    keys: list[Any]
    matrix: np.ndarray
    norms: np.ndarray

    def nearest(self, vector: list[float], metric: str, k: int, threshold: float | None) -> list[tuple[Any, float]]:
        """The ``k`` closest keys and their distances (the same values DuckDB's distance functions give)."""
        query = np.asarray(vector, dtype=np.float32)
        dots = self.matrix @ query
        if metric == "cosine":
            denominator = self.norms * float(np.linalg.norm(query))
            scores = 1.0 - np.divide(dots, denominator, out=np.zeros_like(dots), where=denominator > 0)
        elif metric == "l2sq":
            scores = np.maximum(self.norms ** 2 - 2.0 * dots + float(query @ query), 0.0)
        else:
            scores = -dots
        candidates = np.flatnonzero(scores < threshold) if threshold is not None else np.arange(len(scores))
        if len(candidates) > k:
            candidates = candidates[np.argpartition(scores[candidates], k - 1)[:k]]
        return sorted(((self.keys[index], float(scores[index])) for index in candidates),
                      key=lambda pair: (pair[1], str(pair[0])))


_SHARED: dict[str, _Shared] = {}
_SHARED_LOCK = threading.Lock()


class KnowledgeBaseError(ValueError):
    """A knowledge base that cannot be used as asked (locked, corrupt, another schema or dimension)."""


def resolve_path(uri: str | None, name: str | None = None) -> str:
    """``duckdb://path`` -> ``path``; None -> ``<synalinks_home>/<name or 'database'>.db``."""
    if uri:
        return uri.replace("duckdb://", "", 1)
    if name is not None:
        sanitize_identifier(name)  # it becomes a file name: no "../"
    return os.path.join(synalinks_home(), f"{name or 'database'}.db")


def describe_embedding_model(model: Any) -> str:
    """What a table records about the model that embedded it (class and model string, no secrets)."""
    return f"{type(model).__name__}({getattr(model, 'model', '?')})"


def _record_parts(record: JsonDataModel) -> tuple[dict[str, Any], dict[str, Any]]:
    """A record's schema and JSON, read in place: ``get_json()`` deep-copies, which cost most of a write's time
    for records with vectors; the adapter only reads them (it builds its own dict of values)."""
    return record._schema, record._json  # noqa: SLF001 - same package, read only


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _query_vectors(vector_or_vectors: Any) -> list[list[float]] | None:
    if vector_or_vectors is None or len(vector_or_vectors) == 0:
        return None
    first = vector_or_vectors[0]
    if isinstance(first, (int, float, np.floating, np.integer)):
        return [[float(value) for value in vector_or_vectors]]
    return [[float(value) for value in vector] for vector in vector_or_vectors]


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
        self.uri = resolve_path(uri, name)
        self.embedding_model = embedding_model
        self.stemmer, self.stopwords, self.ignore = stemmer, stopwords, ignore
        self.strip_accents, self.lower = strip_accents, lower
        self.metric = metric
        self.vss_key = vss_key
        self.vector_dim = vector_dim
        self.read_only = read_only
        self._encryption_key = encryption_key
        self._shared: _Shared | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        self._acquire()
        if wipe_on_start:
            self.wipe_database()
        self.data_models: dict[str, Any] = {}
        for data_model in data_models or []:
            schema = data_model.get_schema()
            if not schema.get("title"):
                raise ValueError("Each registered data model must carry a schema `title`; got a schema with no title.")
            table = table_identifier(schema["title"])
            self.data_models[table] = data_model
            self._run(self._ensure_table, table, schema)

    # -- the connection --------------------------------------------------------------------

    def _acquire(self) -> None:
        """Use this process's connection to the file, opening it if none is open (see :class:`_Shared`)."""
        key = None if self.uri == ":memory:" else \
            f"{os.path.realpath(self.uri)}|{self.read_only}|{self._encryption_key is not None}"
        with _SHARED_LOCK:
            shared = _SHARED.get(key) if key is not None else None
            if shared is None:
                shared = _Shared(self._open(), threading.RLock())
                if key is not None:
                    _SHARED[key] = shared
            shared.users += 1
        self._shared, self._key, self._lock, self._con = shared, key, shared.lock, shared.con

    def _open(self) -> duckdb.DuckDBPyConnection:
        if self.uri != ":memory:":
            if self.read_only and not os.path.exists(self.uri):
                raise KnowledgeBaseError(f"knowledge base {self.uri}: no such file (read_only=True opens an existing one)")
            Path(self.uri).parent.mkdir(parents=True, exist_ok=True)
        try:
            if self._encryption_key is not None:
                con = extensions.connect(":memory:")
                extensions.load_extensions(con, ["httpfs"])  # DuckDB writes encrypted files with httpfs's OpenSSL
                options = ["ENCRYPTION_KEY ?"] + (["READ_ONLY"] if self.read_only else [])
                con.execute(f"ATTACH '{self.uri.replace(chr(39), chr(39) * 2)}' AS kb ({', '.join(options)})",
                            [self._encryption_key])
                con.execute("USE kb")
            else:
                con = extensions.connect(self.uri, read_only=self.read_only)
        except duckdb.IOException as error:
            text = str(error)
            if "lock" in text.lower():
                raise KnowledgeBaseError(
                    f"knowledge base {self.uri} is locked by another process that has it open for writing; close it, "
                    f"or open both with read_only=True ({text})") from None
            raise KnowledgeBaseError(f"knowledge base {self.uri} cannot be opened: {text}") from None
        except duckdb.Error as error:
            raise KnowledgeBaseError(
                f"knowledge base {self.uri} cannot be opened (not a DuckDB file of version {duckdb.__version__}, or "
                f"damaged): {error}") from None
        extensions.load_extensions(con, ["fts", "vss"])
        # Lock the connection against the host's files: SQL from an LM (Text2SQL, sql()) must not read_csv('/etc/passwd').
        con.execute("SET enable_external_access=false;")
        if not self.read_only:
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {META};")
            con.execute(f"CREATE TABLE IF NOT EXISTS {META}.tables (name VARCHAR PRIMARY KEY, fts_stale BOOLEAN, "
                        "embedding_model VARCHAR, dimension INTEGER);")
            con.execute(f"CREATE TABLE IF NOT EXISTS {META}.settings (key VARCHAR PRIMARY KEY, value VARCHAR);")
        return con

    def close(self) -> None:
        """Stop using the connection (idempotent); the last user of the file closes it."""
        shared, self._shared, self._con = self._shared, None, None
        if shared is None:
            return
        with _SHARED_LOCK:
            shared.users -= 1
            if shared.users > 0:
                return
            if self._key is not None:
                _SHARED.pop(self._key, None)
        with shared.lock:
            try:
                shared.con.close()
            except duckdb.Error:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._acquire()
        assert self._con is not None
        return self._con

    def _locked(self, function: Callable[..., T], *args: Any) -> T:
        with self._lock:
            return function(*args)

    def _run(self, function: Callable[..., T], *args: Any) -> T:
        return self._locked(function, *args)

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function`` on the connection, under the lock, off the event loop."""
        return await asyncio.to_thread(self._locked, function, *args)

    def _write_guard(self) -> None:
        if self.read_only:
            raise KnowledgeBaseError(f"knowledge base {self.uri} was opened with read_only=True: it cannot be written")

    # -- tables ----------------------------------------------------------------------------

    def _table_columns(self, table: str) -> list[tuple[str, str]]:
        con = self._connection()
        assert self._shared is not None
        cached = self._shared.columns.get(table)
        if cached is not None:
            return cached
        rows = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema='main' AND "
            "table_name=? ORDER BY ordinal_position", [table]).fetchall()
        columns = [(name, kind) for name, kind in rows]
        if columns:
            self._shared.columns[table] = columns
        return columns

    def _schema_changed(self) -> None:
        if self._shared is not None:
            self._shared.columns.clear()
            self._shared.fresh_fulltext.clear()
            self._shared.vectors.clear()

    def _fulltext_stale(self, table: str) -> None:
        """The table was written: its BM25 index is stale and its vectors in memory are dropped."""
        if self._shared is not None:
            self._shared.fresh_fulltext.discard(table)
            self._shared.vectors.pop(table, None)

    def _vector_matrix(self, table: str, id_key: str) -> VectorMatrix:
        assert self._shared is not None
        cached = self._shared.vectors.get(table)
        if cached is None:
            arrow = self._connection().execute(
                f"SELECT {q(id_key)}, {q(self.vss_key)} FROM {table} WHERE {q(self.vss_key)} IS NOT NULL").arrow()
            arrow = arrow.read_all().combine_chunks()
            dimension = self._vector_dimension(table) or 0
            flat = arrow.column(1).combine_chunks().flatten().to_numpy(zero_copy_only=False)
            matrix = np.ascontiguousarray(flat.reshape(-1, dimension), dtype=np.float32)
            cached = VectorMatrix(arrow.column(0).to_pylist(), matrix, np.linalg.norm(matrix, axis=1))
            self._shared.vectors[table] = cached
        return cached

    def _tables(self) -> list[str]:
        return [row[0] for row in self._connection().execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='main' ORDER BY table_name").fetchall()]

    def _require_columns(self, table: str) -> list[tuple[str, str]]:
        columns = self._table_columns(table)
        if not columns:
            known = ", ".join(self._tables()) or "none"
            raise KnowledgeBaseError(f"knowledge base {self.uri}: no table {table!r} (tables: {known})")
        return columns

    def _meta(self, table: str) -> tuple[bool, str | None, int | None] | None:
        if self.read_only and self._meta_missing():
            return None
        row = self._connection().execute(
            f"SELECT fts_stale, embedding_model, dimension FROM {META}.tables WHERE name=?", [table]).fetchone()
        return None if row is None else (bool(row[0]), row[1], row[2])

    def _ensure_table(self, table: str, schema: dict[str, Any]) -> None:
        """Create the table for ``schema``, or check that the existing one has the same fields."""
        wanted = columns_for_schema(schema, self.vss_key)
        existing = [(name, kind) for name, kind in self._table_columns(table) if name != self.vss_key]
        if existing:
            if existing != wanted:
                def show(columns: list[tuple[str, str]]) -> str:
                    return ", ".join(f"{name}: {kind}" for name, kind in columns)
                raise KnowledgeBaseError(
                    f"knowledge base {self.uri}: table {table!r} was created with fields ({show(existing)}) but the data "
                    f"model {schema.get('title')!r} now declares ({show(wanted)}); keep the old data model, use another "
                    "title, or rebuild the knowledge base (wipe_on_start=True)")
            return
        self._write_guard()
        definition = ", ".join(f"{q(name)} {kind}" + (" PRIMARY KEY" if index == 0 else "")
                               for index, (name, kind) in enumerate(wanted))
        con = self._connection()
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({definition});")
        self._schema_changed()
        con.execute(f"INSERT INTO {META}.tables VALUES (?, TRUE, NULL, NULL) ON CONFLICT (name) DO NOTHING", [table])

    def _vector_dimension(self, table: str) -> int | None:
        for name, kind in self._table_columns(table):
            if name == self.vss_key and kind.startswith("FLOAT["):
                return int(kind[6:-1])
        return None

    def _check_dimension(self, table: str, dimension: int) -> None:
        """Add the vector column on the first vector; refuse vectors of another size than the stored ones."""
        stored = self._vector_dimension(table)
        meta = self._meta(table)
        built_with = meta[1] if meta else None
        current = describe_embedding_model(self.embedding_model) if self.embedding_model is not None else "given vectors"
        if stored is None:
            self._write_guard()
            self._connection().execute(f"ALTER TABLE {table} ADD COLUMN {q(self.vss_key)} FLOAT[{dimension}];")
            self._schema_changed()
            self._connection().execute(
                f"INSERT INTO {META}.tables VALUES (?, TRUE, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "embedding_model = EXCLUDED.embedding_model, dimension = EXCLUDED.dimension", [table, current, dimension])
            return
        if stored != dimension:
            raise KnowledgeBaseError(
                f"knowledge base {self.uri}: table {table!r} stores {stored}-dimensional vectors "
                f"(embedded by {built_with or 'an unrecorded model'}) but {current} gives {dimension}-dimensional ones; "
                "use the model the table was built with, or rebuild it (wipe_on_start=True)")
        if (self.embedding_model is not None and built_with and built_with != current
                and built_with != "given vectors"):
            raise KnowledgeBaseError(
                f"knowledge base {self.uri}: table {table!r} was embedded by {built_with} but this knowledge base embeds "
                f"with {current}; their vectors are not comparable: use {built_with}, or rebuild (wipe_on_start=True)")

    def wipe_database(self) -> None:
        """Drop every table (and its index)."""
        self._write_guard()
        with self._lock:
            for table in self._tables():
                self._drop(table)
            self._connection().execute(f"DELETE FROM {META}.settings")

    def _drop(self, table: str) -> bool:
        con = self._connection()
        if not self._table_columns(table):
            return False
        try:
            con.execute(f"PRAGMA drop_fts_index('main.{table}');")
        except duckdb.Error:
            pass
        con.execute(f"DROP TABLE IF EXISTS {table};")
        self._schema_changed()
        con.execute(f"DELETE FROM {META}.tables WHERE name=?", [table])
        return True

    def get_symbolic_data_models(self, remove_embedding: bool = True) -> list[SymbolicDataModel]:
        """One SymbolicDataModel per table, read from the database."""
        with self._lock:
            return [SymbolicDataModel(schema=self._table_schema(table, remove_embedding), name=table)
                    for table in self._tables()]

    def _table_schema(self, table: str, remove_embedding: bool = True) -> dict[str, Any]:
        columns = self._table_columns(table)
        schema = schema_for_columns(table, columns, self.vss_key if remove_embedding else "")
        declared = self.data_models.get(table) if hasattr(self, "data_models") else None
        if declared is not None:  # the declared model's descriptions help an LM reading the schema (Text2SQL)
            declared_schema = declared.get_schema()
            if declared_schema.get("description"):
                schema["description"] = declared_schema["description"]
            for name, spec in (declared_schema.get("properties") or {}).items():
                column = schema["properties"].get(column_identifier(name))
                if column is not None and spec.get("description"):
                    column["description"] = spec["description"]
        return schema

    # -- writing ---------------------------------------------------------------------------

    async def update(self, data_model_or_data_models: Any) -> Any:
        """Insert or replace records by primary key (their first field); their key(s), scalar in -> scalar out."""
        single = not isinstance(data_model_or_data_models, (list, tuple))
        records = [self._as_json_data_model(item) for item in _as_list(data_model_or_data_models)]
        if not records:
            return []
        self._write_guard()
        by_table: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        ids: list[Any] = []
        keys: dict[int, tuple[str, str]] = {}  # per distinct schema object: (table, primary key)
        for record in records:
            schema, json_value = _record_parts(record)
            if id(schema) not in keys:
                if not schema.get("title"):
                    raise ValueError("a record's schema has no `title`: it names the table")
                keys[id(schema)] = (table_identifier(schema["title"]), columns_for_schema(schema, self.vss_key)[0][0])
            table, id_key = keys[id(schema)]
            values = {column_identifier(key): value for key, value in json_value.items()}
            if values.get(id_key) is None:
                raise ValueError(f"Primary key '{id_key}' is required but not provided (table {table!r})")
            ids.append(values[id_key])
            by_table.setdefault(table, []).append((schema, values))
        await self._embed_missing(by_table)
        await self._call(self._write, by_table)
        return ids[0] if single else ids

    def _as_json_data_model(self, item: Any) -> JsonDataModel:
        if isinstance(item, JsonDataModel):
            return item
        if hasattr(item, "to_json_data_model"):
            return item.to_json_data_model()
        raise TypeError(f"update() takes DataModel or JsonDataModel records, got {type(item).__name__}")

    def _text_of(self, values: dict[str, Any], schema: dict[str, Any]) -> str:
        """What is embedded for a record without a vector: its string fields after the key, one per line."""
        columns = columns_for_schema(schema, self.vss_key)
        texts = [str(values[name]) for name, kind in columns[1:] if kind == "VARCHAR" and values.get(name)]
        return "\n".join(texts) or str(values[columns[0][0]])

    async def _embed_missing(self, by_table: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]) -> None:
        if self.embedding_model is None:
            return
        pending = [(schema, values) for rows in by_table.values() for schema, values in rows
                   if values.get(self.vss_key) is None]
        if not pending:
            return
        vectors = await self._embed([self._text_of(values, schema) for schema, values in pending])
        for (_, values), vector in zip(pending, vectors):
            values[self.vss_key] = vector

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        result = await self.embedding_model(EmbeddingRequest(texts=texts))
        vectors = result.get("embeddings") if result is not None else None
        if not vectors or len(vectors) != len(texts):
            raise KnowledgeBaseError(
                f"embedding model {describe_embedding_model(self.embedding_model)} returned "
                f"{len(vectors or [])} vectors for {len(texts)} texts")
        return [list(map(float, vector)) for vector in vectors]

    def _write(self, by_table: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]) -> None:
        con = self._connection()
        for table, rows in by_table.items():
            self._ensure_table(table, rows[0][0])
            vectors = [values[self.vss_key] for _, values in rows if values.get(self.vss_key) is not None]
            if vectors:
                dimensions = {len(vector) for vector in vectors}
                if len(dimensions) > 1:
                    raise KnowledgeBaseError(f"table {table!r}: records carry vectors of several sizes {sorted(dimensions)}")
                self._check_dimension(table, dimensions.pop())
        con.execute("BEGIN TRANSACTION;")
        try:
            for table, rows in by_table.items():
                self._upsert(table, [values for _, values in rows])
                con.execute(f"UPDATE {META}.tables SET fts_stale = TRUE WHERE name=?", [table])
                self._fulltext_stale(table)
            con.execute("COMMIT;")
        except BaseException:
            con.execute("ROLLBACK;")
            raise

    def _upsert(self, table: str, rows: list[dict[str, Any]]) -> None:
        types = dict(self._table_columns(table))
        id_key = next(iter(types))
        unknown = sorted({key for row in rows for key in row} - set(types))
        if unknown:
            raise KnowledgeBaseError(f"table {table!r} has no field(s) {unknown}; its fields: {sorted(types)}")
        latest: dict[Any, dict[str, Any]] = {}
        for row in rows:  # the last record of a key wins (one statement cannot update a row twice)
            latest[row[id_key]] = row
        columns = [name for name in types if any(name in row for row in latest.values())]
        data = {name: [to_column_value(row.get(name), types[name]) for row in latest.values()] for name in columns}
        updates = ", ".join(f"{q(name)} = EXCLUDED.{q(name)}" for name in columns if name != id_key)
        conflict = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
        listed = ", ".join(q(name) for name in columns)
        con = self._connection()
        try:
            batch = pa.table(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed Python types in a column: row by row
            con.executemany(f"INSERT INTO {table} ({listed}) VALUES ({', '.join('?' * len(columns))}) "
                            f"ON CONFLICT ({q(id_key)}) {conflict};",
                            [[data[name][index] for name in columns] for index in range(len(latest))])
            return
        con.register("_promptgym_batch", batch)
        try:
            casts = ", ".join(f"CAST({q(name)} AS {types[name]})" for name in columns)
            con.execute(f"INSERT INTO {table} ({listed}) SELECT {casts} FROM _promptgym_batch "
                        f"ON CONFLICT ({q(id_key)}) {conflict};")
        finally:
            con.unregister("_promptgym_batch")

    async def delete(self, id_or_ids: Any, *, table_name: str) -> int:
        """Delete records by key; how many were there. A missing table warns and deletes nothing."""
        ids = _as_list(id_or_ids)
        if not ids:
            return 0
        self._write_guard()
        table = table_identifier(table_name)

        def run() -> int:
            columns = self._table_columns(table)
            if not columns:
                warnings.warn(f"delete(): no table named '{table}'; nothing to delete.", stacklevel=3)
                return 0
            id_key = columns[0][0]
            con = self._connection()
            con.execute("BEGIN TRANSACTION;")
            try:
                deleted = con.execute(f"DELETE FROM {table} WHERE {q(id_key)} IN ({', '.join('?' * len(ids))}) "
                                      f"RETURNING {q(id_key)};", ids).fetchall()
                con.execute(f"UPDATE {META}.tables SET fts_stale = TRUE WHERE name=?", [table])
                self._fulltext_stale(table)
                con.execute("COMMIT;")
            except BaseException:
                con.execute("ROLLBACK;")
                raise
            return len(deleted)

        return await self._call(run)

    async def drop_table(self, table_name: str) -> bool:
        """Drop a table and its index; False when there was none."""
        self._write_guard()
        table = table_identifier(table_name)
        dropped = await self._call(self._drop, table)
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

        def run() -> dict[str, Any]:
            if not self._table_columns(old):
                raise ValueError(f"rename(): no table named {old!r} found in the knowledge base.")
            if new != old:
                self._write_guard()
                con = self._connection()
                try:
                    con.execute(f"PRAGMA drop_fts_index('main.{old}');")
                except duckdb.Error:
                    pass
                con.execute(f"ALTER TABLE {old} RENAME TO {new};")
                self._schema_changed()
                con.execute(f"UPDATE {META}.tables SET name = ?, fts_stale = TRUE WHERE name = ?", [new, old])
            return self._table_schema(new)

        schema = await self._call(run)
        description = table_description
        if description is None and not isinstance(source, str):
            description = source.get_schema().get("description")
        if description is not None:
            schema["description"] = description
        model = SymbolicDataModel(schema=schema, name=new)
        self.data_models.pop(old, None)
        self.data_models[new] = model
        return model

    # -- what ingestion needs --------------------------------------------------------------

    async def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Vectors for ``texts`` from the knowledge base's embedding model (one batched call)."""
        if self.embedding_model is None:
            raise ValueError("this knowledge base has no embedding_model")
        return await self._embed(texts)

    async def existing_ids(self, ids: list[Any], *, table_name: str) -> set[Any]:
        """Which of these keys the table already holds (none when it does not exist yet)."""
        table = table_identifier(table_name)

        def run() -> set[Any]:
            columns = self._table_columns(table)
            if not columns or not ids:
                return set()
            rows = self._connection().execute(
                f"SELECT {q(columns[0][0])} FROM {table} WHERE {q(columns[0][0])} IN ({', '.join('?' * len(ids))})",
                list(ids)).fetchall()
            return {row[0] for row in rows}

        return await self._call(run)

    async def delete_others(self, keep: list[Any], *, table_name: str, where: dict[str, Any]) -> int:
        """Delete the records matching ``where`` whose key is not in ``keep`` (a re-ingested file's old chunks)."""
        self._write_guard()
        table = table_identifier(table_name)

        def run() -> int:
            columns = self._table_columns(table)
            if not columns:
                return 0
            condition, params = self._where(table, where)
            kept = f" AND {q(columns[0][0])} NOT IN ({', '.join('?' * len(keep))})" if keep else ""
            con = self._connection()
            con.execute("BEGIN TRANSACTION;")
            try:
                deleted = con.execute(f"DELETE FROM {table} WHERE TRUE{condition}{kept} RETURNING {q(columns[0][0])}",
                                      params + list(keep)).fetchall()
                if deleted:
                    con.execute(f"UPDATE {META}.tables SET fts_stale = TRUE WHERE name=?", [table])
                self._fulltext_stale(table)
                con.execute("COMMIT;")
            except BaseException:
                con.execute("ROLLBACK;")
                raise
            return len(deleted)

        return await self._call(run)

    def get_setting(self, key: str) -> str | None:
        """A value the knowledge base keeps about itself (the CLI's embedding model, chunk size...)."""
        with self._lock:
            if self._meta_missing():
                return None
            row = self._connection().execute(f"SELECT value FROM {META}.settings WHERE key=?", [key]).fetchone()
            return None if row is None else row[0]

    def set_setting(self, key: str, value: str) -> None:
        self._write_guard()
        with self._lock:
            self._connection().execute(f"INSERT INTO {META}.settings VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                                       "value = EXCLUDED.value", [key, value])

    def table_info(self) -> list[dict[str, Any]]:
        """Per table: name, rows, fields, vector dimension and the model that embedded it."""
        with self._lock:
            found = []
            for table in self._tables():
                meta = self._meta(table)
                found.append({"table": table,
                              "rows": int(self._connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0]),
                              "fields": [name for name, _ in self._table_columns(table) if name != self.vss_key],
                              "dimension": self._vector_dimension(table),
                              "embedding_model": meta[1] if meta else None})
            return found

    def _meta_missing(self) -> bool:
        return self._connection().execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema=?", [META]).fetchone()[0] < 2

    # -- bulk loading ----------------------------------------------------------------------

    async def from_csv(self, path: str, *, table_name: str | None = None, table_description: str | None = None,
                       delimiter: str = ",", encoding: str = "utf-8", header: bool = True) -> SymbolicDataModel:
        """Load a CSV file into a table (created from its columns, first column the key; rows upserted)."""
        quote = "'" + delimiter.replace("'", "''") + "'"
        options = f", delim={quote}, header={'true' if header else 'false'}, encoding='{encoding.replace(chr(39), '')}'"
        return await self._bulk_load(path, table_name, table_description, f"read_csv(?{options})")

    async def from_parquet(self, path: str, *, table_name: str | None = None,
                           table_description: str | None = None) -> SymbolicDataModel:
        return await self._bulk_load(path, table_name, table_description, "read_parquet(?)")

    async def from_json(self, path: str, *, table_name: str | None = None,
                        table_description: str | None = None) -> SymbolicDataModel:
        """Load a JSON file holding an array of objects."""
        return await self._bulk_load(path, table_name, table_description, "read_json(?, format='array')")

    async def from_jsonl(self, path: str, *, table_name: str | None = None,
                         table_description: str | None = None) -> SymbolicDataModel:
        """Load a JSON Lines file (one object per line)."""
        return await self._bulk_load(path, table_name, table_description,
                                     "read_json(?, format='newline_delimited')")

    async def _bulk_load(self, path: str, table_name: str | None, description: str | None,
                         reader: str) -> SymbolicDataModel:
        if not os.path.exists(path):
            raise FileNotFoundError(f"File not found: {path}")
        raw = table_name if table_name is not None else Path(path).stem
        if not to_pascal_case(raw):
            raise ValueError(f"Cannot derive a table name from {raw!r}: after PascalCase normalization nothing is "
                             "left. Pass an explicit `table_name=`.")
        table = table_identifier(raw)
        self._write_guard()
        # The main connection may not read files (see _open); a private in-memory one reads it into Arrow.
        reader_con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                        "autoload_known_extensions": False})
        try:
            loaded = await asyncio.to_thread(
                lambda: reader_con.execute(f"SELECT * FROM {reader}", [path]).fetch_arrow_table())
            described = reader_con.execute(f"DESCRIBE SELECT * FROM {reader}", [path]).fetchall()
        finally:
            reader_con.close()
        if not described:
            raise ValueError(f"{path}: no columns detected in source file.")
        names = [column_identifier(row[0]) for row in described]
        kinds = [row[1] for row in described]
        batch = loaded.rename_columns(names)

        def run() -> None:
            con = self._connection()
            if not self._table_columns(table):
                definition = ", ".join(f"{q(name)} {kind}" + (" PRIMARY KEY" if index == 0 else "")
                                       for index, (name, kind) in enumerate(zip(names, kinds)))
                con.execute(f"CREATE TABLE {table} ({definition});")
                self._schema_changed()
            existing = dict(self._table_columns(table))
            missing = [name for name in names if name not in existing]
            if missing:
                raise KnowledgeBaseError(f"{path}: table {table!r} has no column(s) {missing}; its columns: "
                                         f"{sorted(existing)}")
            id_key = next(iter(existing))
            updates = ", ".join(f"{q(name)} = EXCLUDED.{q(name)}" for name in names if name != id_key)
            con.register("_promptgym_load", batch)
            con.execute("BEGIN TRANSACTION;")
            try:
                con.execute(f"INSERT INTO {table} ({', '.join(q(name) for name in names)}) SELECT * FROM _promptgym_load "
                            f"ON CONFLICT ({q(id_key)}) {'DO UPDATE SET ' + updates if updates else 'DO NOTHING'};")
                con.execute(f"INSERT INTO {META}.tables VALUES (?, TRUE, NULL, NULL) ON CONFLICT (name) DO UPDATE "
                            "SET fts_stale = TRUE", [table])
                self._fulltext_stale(table)
                con.execute("COMMIT;")
            except BaseException:
                con.execute("ROLLBACK;")
                raise
            finally:
                con.unregister("_promptgym_load")

        await self._call(run)
        schema = await self._call(self._table_schema, table)
        if description is not None:
            schema["description"] = description
        model = SymbolicDataModel(schema=schema, name=table)
        self.data_models.setdefault(table, model)
        return model

    # -- reading ---------------------------------------------------------------------------

    def _rows(self, table: str, arrow: pa.Table, remove_embedding: bool = True) -> list[dict[str, Any]]:
        types = dict(self._table_columns(table))
        rows = arrow.to_pylist()
        for row in rows:
            if remove_embedding:
                row.pop(self.vss_key, None)
            for key, value in row.items():
                row[key] = from_column_value(value, types.get(key, ""))
        return rows

    def _select_list(self, table: str, remove_embedding: bool = True) -> str:
        if remove_embedding and self._vector_dimension(table) is not None:
            return f"* EXCLUDE ({q(self.vss_key)})"
        return "*"

    def _where(self, table: str, filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
        """``AND col = ?`` per filter (a list means ``IN``); unknown fields are an error naming them."""
        if not filters:
            return "", []
        columns = dict(self._table_columns(table))
        clauses, params = [], []
        for key, value in filters.items():
            column = column_identifier(key)
            if column not in columns:
                raise ValueError(f"filters: table {table!r} has no field {key!r}; its fields: {sorted(columns)}")
            if isinstance(value, (list, tuple, set)):
                values = list(value)
                clauses.append(f"{q(column)} IN ({', '.join('?' * len(values))})" if values else "FALSE")
                params += values
            elif value is None:
                clauses.append(f"{q(column)} IS NULL")
            else:
                clauses.append(f"{q(column)} = ?")
                params.append(value)
        return " AND " + " AND ".join(clauses), params

    def _records(self, table: str, rows: list[dict[str, Any]]) -> list[JsonDataModel]:
        schema = self._table_schema(table)
        id_key = next(iter(schema["properties"]))
        return [JsonDataModel(json=row, schema=schema, name=str(row.get(id_key))) for row in rows]

    async def get(self, id_or_ids: Any, *, table_name: str, remove_embedding: bool = True) -> Any:
        """The record(s) with these key(s): None where there is none; scalar in -> scalar out."""
        single = not isinstance(id_or_ids, (list, tuple))
        ids = _as_list(id_or_ids)
        if not ids:
            return None if single else []
        table = table_identifier(table_name)

        def run() -> list[JsonDataModel | None]:
            columns = self._table_columns(table)
            if not columns:
                warnings.warn(f"get(): no table named '{table}'.", stacklevel=3)
                return [None] * len(ids)
            id_key = columns[0][0]
            arrow = self._connection().execute(
                f"SELECT {self._select_list(table, remove_embedding)} FROM {table} WHERE {q(id_key)} IN "
                f"({', '.join('?' * len(ids))})", ids).arrow().read_all()
            found = {record.get(id_key): record
                     for record in self._records(table, self._rows(table, arrow, remove_embedding))}
            return [found.get(key) for key in ids]

        results = await self._call(run)
        return results[0] if single else results

    async def getall(self, *, table_name: str, limit: int = 50, offset: int = 0, remove_embedding: bool = True,
                     filters: dict[str, Any] | None = None) -> list[JsonDataModel]:
        """Records of a table in key order, paginated (``filters``: field -> value or list of values)."""
        table = table_identifier(table_name)

        def run() -> list[JsonDataModel]:
            columns = self._table_columns(table)
            if not columns:
                warnings.warn(f"Failed to read table '{table}': it does not exist.", stacklevel=3)
                return []
            where, params = self._where(table, filters)
            arrow = self._connection().execute(
                f"SELECT {self._select_list(table, remove_embedding)} FROM {table} WHERE TRUE{where} "
                f"ORDER BY {q(columns[0][0])} LIMIT ? OFFSET ?", params + [limit, offset]).arrow().read_all()
            return self._records(table, self._rows(table, arrow, remove_embedding))

        return await self._call(run)

    async def count(self, *, table_name: str) -> int:
        """How many records a table holds (0 when it does not exist)."""
        table = table_identifier(table_name)

        def run() -> int:
            if not self._table_columns(table):
                return 0
            return int(self._connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0])

        return await self._call(run)

    async def sql(self, sql: str, *, params: Any = None, read_only: bool = True, output_format: str = "json",
                  **_: Any) -> Any:
        """Run SQL; ``read_only=True`` (default) accepts SELECT statements only. The connection never reads files."""
        if read_only:
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
        elif self.read_only:
            self._write_guard()

        def run() -> pa.Table:
            result = self._connection().execute(sql, params or []).arrow().read_all()
            if not read_only:  # it may have changed tables or written rows
                self._schema_changed()
            return result

        return format_search_results(await self._call(run), output_format)

    # -- search ----------------------------------------------------------------------------

    def _refresh_fulltext_index(self, table: str, columns: list[tuple[str, str]]) -> bool:
        """Rebuild the BM25 index if a write made it stale; False when the table has no text to index."""
        if not [name for name, kind in columns[1:] if kind == "VARCHAR"]:
            return False
        assert self._shared is not None
        if table in self._shared.fresh_fulltext:
            return True
        meta = self._meta(table)
        index_exists = self._connection().execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name=?", [f"fts_main_{table}"]).fetchone()
        if index_exists and meta is not None and not meta[0]:
            self._shared.fresh_fulltext.add(table)
            return True
        if self.read_only:
            if index_exists:
                return True  # built before the last writes: a read-only reader searches what was indexed
            raise KnowledgeBaseError(f"knowledge base {self.uri}: table {table!r} has no full-text index yet; run one "
                                     "full-text search with the knowledge base open for writing first")
        options = [f"stemmer='{self.stemmer}'"]
        for key, value in (("stopwords", self.stopwords), ("ignore", self.ignore),
                           ("strip_accents", self.strip_accents), ("lower", self.lower)):
            if value is not None:
                options.append(f"{key}=" + (str(int(value)) if isinstance(value, bool) else
                                            "'" + str(value).replace("'", "''") + "'"))
        con = self._connection()
        con.execute(f"PRAGMA create_fts_index('main.{table}', '{columns[0][0]}', '*', {', '.join(options)}, "
                    "overwrite=1);")
        con.execute(f"INSERT INTO {META}.tables VALUES (?, FALSE, NULL, NULL) ON CONFLICT (name) DO UPDATE "
                    "SET fts_stale = FALSE", [table])
        self._shared.fresh_fulltext.add(table)
        return True

    async def fulltext_search(self, text_or_texts: Any, *, table_name: str, k: int = 10,
                              threshold: float | None = None, conjunctive: bool = False,
                              bm25_b: float | None = None, bm25_k: float | None = None, output_format: str = "json",
                              filters: dict[str, Any] | None = None) -> Any:
        """BM25 search; ``score`` is rescaled to [0, 1] over the results (best 1.0), ``threshold`` on that scale."""
        if not text_or_texts:
            return format_search_results([], output_format)
        texts = _as_list(text_or_texts)
        table = table_identifier(table_name)

        def run() -> list[dict[str, Any]]:
            columns = self._require_columns(table)
            if not self._refresh_fulltext_index(table, columns):
                warnings.warn(f"Skipping FTS search for {table}: no text columns to index.", stacklevel=3)
                return []
            id_key = columns[0][0]
            extras = "".join(f", {name} := {float(value)}" for name, value in (("k", bm25_k), ("b", bm25_b))
                             if value is not None) + (", conjunctive := 1" if conjunctive else "")
            where, params = self._where(table, filters)
            sql = (f"SELECT * FROM (SELECT {self._select_list(table)}, fts_main_{table}.match_bm25({q(id_key)}, ?{extras}) "
                   f"AS score FROM {table} WHERE TRUE{where}) WHERE score IS NOT NULL ORDER BY score DESC, {q(id_key)} "
                   "LIMIT ?")
            best: dict[Any, dict[str, Any]] = {}
            for text in texts:
                arrow = self._connection().execute(sql, [str(text), *params, k]).arrow().read_all()
                for row in self._rows(table, arrow):
                    if row[id_key] not in best or row["score"] > best[row[id_key]]["score"]:
                        best[row[id_key]] = row
            ranked = sorted(best.values(), key=lambda row: (-row["score"], str(row[id_key])))[:k]
            return ranked

        ranked = minmax_normalize_scores(await self._call(run))
        if threshold is not None:
            ranked = [row for row in ranked if row["score"] >= threshold]
        return format_search_results(ranked, output_format)

    async def _vectors_for(self, text_or_texts: Any, vector_or_vectors: Any, what: str) -> list[list[float]] | None:
        vectors = _query_vectors(vector_or_vectors)
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

        def run() -> list[dict[str, Any]]:
            columns = self._require_columns(table)
            dimension = self._vector_dimension(table)
            if dimension is None:
                return []  # nothing embedded yet
            if len(vectors[0]) != dimension:
                self._check_dimension(table, len(vectors[0]))
            id_key = columns[0][0]
            if not filters:  # the vectors in memory: one matrix product per query
                matrix = self._vector_matrix(table, id_key)
                nearest: dict[Any, float] = {}
                for vector in vectors:
                    for key, distance in matrix.nearest(vector, self.metric, k, threshold):
                        nearest[key] = min(distance, nearest.get(key, distance))
                ranked = sorted(nearest.items(), key=lambda pair: (pair[1], str(pair[0])))[:k]
                if not ranked:
                    return []
                arrow = self._connection().execute(
                    f"SELECT {self._select_list(table)} FROM {table} WHERE {q(id_key)} IN "
                    f"({', '.join('?' * len(ranked))})", [key for key, _ in ranked]).arrow().read_all()
                rows = {row[id_key]: row for row in self._rows(table, arrow)}
                return [{**rows[key], "score": distance} for key, distance in ranked if key in rows]
            distance = f"{_DISTANCE[self.metric]}({q(self.vss_key)}, ?::FLOAT[{dimension}])"
            score = f"power({distance}, 2)" if self.metric == "l2sq" else distance
            where, params = self._where(table, filters)
            sql = (f"SELECT * FROM (SELECT {self._select_list(table)}, {score} AS score FROM {table} WHERE "
                   f"{q(self.vss_key)} IS NOT NULL{where}) " + ("WHERE score < ? " if threshold is not None else "") +
                   f"ORDER BY score ASC, {q(id_key)} LIMIT ?")
            best: dict[Any, dict[str, Any]] = {}
            for vector in vectors:
                arrow = self._connection().execute(
                    sql, [vector, *params, *([threshold] if threshold is not None else []), k]).arrow().read_all()
                for row in self._rows(table, arrow):
                    if row[id_key] not in best or row["score"] < best[row[id_key]]["score"]:
                        best[row[id_key]] = row
            return sorted(best.values(), key=lambda row: (row["score"], str(row[id_key])))[:k]

        return format_search_results(await self._call(run), output_format)

    async def regex_search(self, pattern: str, *, table_name: str, fields: list[str] | None = None,
                           case_sensitive: bool = True, k: int = 10, output_format: str = "json",
                           filters: dict[str, Any] | None = None) -> Any:
        """Records whose string fields match an RE2 pattern (linear time, so an LM's pattern is safe)."""
        if not pattern:
            return format_search_results([], output_format)
        table = table_identifier(table_name)

        def run() -> list[dict[str, Any]]:
            columns = self._require_columns(table)
            strings = [name for name, kind in columns if kind == "VARCHAR"]
            if fields is not None:
                wanted = {column_identifier(field) for field in fields}
                strings = [name for name in strings if name in wanted]
            if not strings:
                warnings.warn(f"Skipping regex search for {table}: no matching string fields.", stacklevel=3)
                return []
            flags = "" if case_sensitive else "i"
            where, params = self._where(table, filters)
            matches = " OR ".join(f"regexp_matches({q(name)}, ?, ?)" for name in strings)
            arrow = self._connection().execute(
                f"SELECT {self._select_list(table)} FROM {table} WHERE ({matches}){where} ORDER BY {q(columns[0][0])} "
                "LIMIT ?", [value for _ in strings for value in (pattern, flags)] + params + [k]).arrow().read_all()
            return self._rows(table, arrow)

        return format_search_results(await self._call(run), output_format)

    async def hybrid_fts_search(self, text_or_texts: Any = None, *, keywords: Any = None, table_name: str,
                                vector_or_vectors: Any = None, k: int = 10, k_rank: int = 60,
                                similarity_threshold: float | None = None, fulltext_threshold: float | None = None,
                                ef_search: int | None = None, conjunctive: bool = False,
                                bm25_b: float | None = None, bm25_k: float | None = None,
                                output_format: str = "json", filters: dict[str, Any] | None = None) -> Any:
        """BM25 and vector rankings fused by Reciprocal Rank Fusion (BM25 alone without an embedder or vectors)."""
        vectors = _query_vectors(vector_or_vectors)
        if not text_or_texts and vectors is None and not keywords:
            return format_search_results([], output_format)
        bm25 = {"conjunctive": conjunctive, "bm25_b": bm25_b, "bm25_k": bm25_k, "filters": filters}
        if vectors is None and (not text_or_texts or self.embedding_model is None):
            rows = await self.fulltext_search(keywords if keywords is not None else text_or_texts,
                                              table_name=table_name, k=k, threshold=fulltext_threshold, **bm25)
            for row in rows:
                row.setdefault("fulltext_score", row["score"])
            return format_search_results(rows, output_format)
        if vectors is None:
            vectors = await self._vectors_for(text_or_texts, None, "hybrid_fts_search")
        assert vectors is not None
        words = _as_list(keywords) if keywords is not None else \
            ([str(text) for text in _as_list(text_or_texts)] if vector_or_vectors is None else [None] * len(vectors))
        if len(words) != len(vectors):
            raise ValueError(f"`keywords` must align with the vector-branch queries: got {len(words)} keyword(s) vs "
                             f"{len(vectors)} quer(ies).")
        id_key = await self._call(lambda: self._require_columns(table_identifier(table_name))[0][0])
        fused: list[dict[str, Any]] = []
        for vector, word in zip(vectors, words):
            lexical = await self.fulltext_search(word, table_name=table_name, k=k * 5, threshold=fulltext_threshold,
                                                 **bm25) if word else []
            semantic = await self.similarity_search(table_name=table_name, vector_or_vectors=vector, k=k * 5,
                                                    threshold=similarity_threshold, filters=filters)
            fused += reciprocal_rank_fusion([lexical, semantic], id_key, k, k_rank)
        best: dict[Any, dict[str, Any]] = {}
        for row in fused:
            if row[id_key] not in best or row["score"] > best[row[id_key]]["score"]:
                best[row[id_key]] = row
        ranked = sorted(best.values(), key=lambda row: (-row["score"], str(row[id_key])))[:k]
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
        vectors = _query_vectors(vector_or_vectors)
        if vectors is None and text_or_texts and self.embedding_model is not None:
            vectors = await self._vectors_for(text_or_texts, None, "hybrid_regex_search")
        regex_rows: list[dict[str, Any]] = []
        table = table_identifier(table_name)
        id_key = await self._call(lambda: self._require_columns(table)[0][0])
        for pattern in patterns:
            for row in await self.regex_search(pattern, table_name=table_name, fields=fields,
                                               case_sensitive=case_sensitive, k=k * 5, filters=filters):
                if all(row[id_key] != seen[id_key] for seen in regex_rows):
                    regex_rows.append(row)
        if not vectors:
            return format_search_results(regex_rows[:k], output_format)
        fused: list[dict[str, Any]] = []
        for vector in vectors:
            semantic = await self.similarity_search(table_name=table_name, vector_or_vectors=vector, k=k * 5,
                                                    threshold=similarity_threshold, filters=filters)
            fused += reciprocal_rank_fusion([semantic, regex_rows], id_key, k, k_rank)
        best: dict[Any, dict[str, Any]] = {}
        for row in fused:
            if row[id_key] not in best or row["score"] > best[row[id_key]]["score"]:
                best[row[id_key]] = row
        ranked = sorted(best.values(), key=lambda row: (-row["score"], str(row[id_key])))[:k]
        return format_search_results(ranked, output_format)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} uri={self.uri}>"

