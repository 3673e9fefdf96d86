"""``TableStore``: a knowledge base's tables on its shared connection: DDL, schema checks, metadata, row decoding.

    store = TableStore("kb.db", vss_key="embedding", read_only=False, encryption_key=None)
    store.locked(store.ensure_table, "Document", Document.get_schema())
    store.columns("Document")       # [('id', 'VARCHAR'), ('text', 'VARCHAR')]

Every method that touches the connection expects the caller to hold
``lock`` (``locked`` / ``call`` take it): the adapter runs each statement in
a worker thread, and DuckDB's connection is not safe to share unlocked.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, TypeVar

import duckdb
import pyarrow as pa

from promptgym.core.json_data_model import JsonDataModel
from promptgym.knowledge_bases.columns import columns_for_schema, from_column_value, schema_for_columns
from promptgym.knowledge_bases.connection import META, SharedConnection, acquire, release
from promptgym.knowledge_bases.filters import placeholders, where_clause
from promptgym.knowledge_bases.errors import (KnowledgeBaseError, ReadOnlyKnowledgeBaseError, dimension_changed,
                                              embedder_changed, fields_changed)
from promptgym.knowledge_bases.naming import column_identifier, q

T = TypeVar("T")
DAMAGED = (duckdb.IOException, duckdb.SerializationException, duckdb.FatalException)
"""What DuckDB raises when a file's pages can't be read back: the file, not the query, is at fault."""
GIVEN_VECTORS = "given vectors"
"""What a table records as its embedder when the vectors came with the records."""


def table_definition(columns: list[tuple[str, str]]) -> str:
    """The column list of a ``CREATE TABLE``: the first column is the primary key."""
    return ", ".join(f"{q(name)} {kind}" + (" PRIMARY KEY" if index == 0 else "")
                     for index, (name, kind) in enumerate(columns))


class SchemaReflection:
    """What a store of tables answers from its (column, type) lists: JSON schemas and decoded rows.

    Shared by the DuckDB store and the LanceDB one: both keep the same column-type vocabulary
    (:mod:`~promptgym.knowledge_bases.columns`), so a record reads back the same from either.
    """

    uri: str
    vss_key: str
    read_only: bool

    def ensure_table(self, table: str, schema: dict[str, Any]) -> None:
        """Create the table for ``schema``, or check that the existing one has the same fields."""
        wanted = columns_for_schema(schema, self.vss_key)
        existing = [(name, kind) for name, kind in self.columns(table) if name != self.vss_key]
        if not existing:
            self.create_table(table, wanted)
        elif existing != wanted:
            raise fields_changed(self.uri, table, existing, wanted, schema.get("title"))

    def check_dimension(self, table: str, dimension: int, embedder: str) -> None:
        """Add the vector column on the first vector; refuse vectors of another size, or from another embedder.

        ``embedder`` describes what made the vectors: a model's description, or :data:`GIVEN_VECTORS`.
        """
        stored = self.vector_dimension(table)
        built_with = self.embedded_by(table)
        if stored is None:
            self.write_guard()
            self.add_vector_column(table, dimension, embedder)
            return
        if stored != dimension:
            raise dimension_changed(self.uri, table, stored, built_with, embedder, dimension)
        if embedder != GIVEN_VECTORS and built_with and built_with not in (embedder, GIVEN_VECTORS):
            raise embedder_changed(self.uri, table, built_with, embedder)

    def check_query_embedder(self, table: str, dimension: int, embedder: str) -> None:
        """Query vectors must come from the table's embedder: another one's are not comparable, even at one size."""
        if self.checked_embedders().get(table) != embedder:
            self.check_dimension(table, dimension, embedder)
            self.checked_embedders()[table] = embedder

    # -- what each store provides ------------------------------------------------------------

    def columns(self, table: str) -> list[tuple[str, str]]:
        """The table's (column, type) list, its vector column (``FLOAT[d]``) included; empty when there is none."""
        raise NotImplementedError

    def tables(self) -> list[str]:
        raise NotImplementedError

    def create_table(self, table: str, columns: list[tuple[str, str]]) -> None:
        raise NotImplementedError

    def embedded_by(self, table: str) -> str | None:
        """What embedded the table's vectors, as recorded; None when unrecorded."""
        raise NotImplementedError

    def add_vector_column(self, table: str, dimension: int, embedder: str) -> None:
        raise NotImplementedError

    def checked_embedders(self) -> dict[str, str]:
        """Per table, the embedder a search was already checked against (so the check runs once)."""
        raise NotImplementedError

    def vector_dimension(self, table: str) -> int | None:
        for name, kind in self.columns(table):
            if name == self.vss_key and kind.startswith("FLOAT["):
                return int(kind[6:-1])
        return None

    def write_guard(self) -> None:
        if self.read_only:
            raise ReadOnlyKnowledgeBaseError(f"knowledge base {self.uri} was opened with read_only=True (as `promptgym "
                                             "serve` opens a served program's): it cannot be written")

    def require_columns(self, table: str) -> list[tuple[str, str]]:
        columns = self.columns(table)
        if not columns:
            known = ", ".join(self.tables()) or "none"
            raise KnowledgeBaseError(f"knowledge base {self.uri}: no table {table!r} (tables: {known})")
        return columns

    def rows(self, table: str, arrow: pa.Table, remove_embedding: bool = True) -> list[dict[str, Any]]:
        """Arrow rows as dicts of JSON values (the vector left out unless asked for)."""
        types = dict(self.columns(table))
        rows = arrow.to_pylist()
        for row in rows:
            if remove_embedding:
                row.pop(self.vss_key, None)
            for key, value in row.items():
                row[key] = from_column_value(value, types.get(key, ""))
        return rows

    def table_schema(self, table: str, declared: Any = None, remove_embedding: bool = True) -> dict[str, Any]:
        """The table's JSON schema from its columns, with the declared data model's descriptions (for an LM)."""
        schema = schema_for_columns(table, self.columns(table), self.vss_key if remove_embedding else "")
        if declared is not None:
            declared_schema = declared.get_schema()
            if declared_schema.get("description"):
                schema["description"] = declared_schema["description"]
            for name, spec in (declared_schema.get("properties") or {}).items():
                column = schema["properties"].get(column_identifier(name))
                if column is not None and spec.get("description"):
                    column["description"] = spec["description"]
        return schema

    def records(self, table: str, rows: list[dict[str, Any]], declared: Any = None) -> list[JsonDataModel]:
        schema = self.table_schema(table, declared)
        id_key = next(iter(schema["properties"]))
        return [JsonDataModel(json=row, schema=schema, name=str(row.get(id_key))) for row in rows]


class TableStore(SchemaReflection):
    """The tables of one DuckDB file, with the caches its shared connection keeps about them."""

    def __init__(self, uri: str, *, vss_key: str, read_only: bool, encryption_key: str | None) -> None:
        self.uri = uri
        self.vss_key = vss_key
        self.read_only = read_only
        self._encryption_key = encryption_key
        self._shared: SharedConnection | None = None
        self._key: str | None = None
        self.shared  # noqa: B018 - open now, so a locked or corrupt file fails at construction

    # -- the connection --------------------------------------------------------------------

    @property
    def shared(self) -> SharedConnection:
        """The file's shared connection, acquired again if this store was closed."""
        if self._shared is None:
            self._shared, self._key = acquire(self.uri, self.read_only, self._encryption_key)
        return self._shared

    def connection(self) -> duckdb.DuckDBPyConnection:
        return self.shared.con

    def locked(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` under the lock; a file that can't be read (damaged, truncated) is a clear error."""
        with self.shared.lock:
            try:
                return function(*args)
            except DAMAGED as error:
                raise KnowledgeBaseError(f"knowledge base {self.uri} could not be read (a damaged or truncated "
                                         f"file? rebuild it, or restore a copy): {error}") from None

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function`` under the lock, off the event loop."""
        return await asyncio.to_thread(self.locked, function, *args)

    def close(self) -> None:
        """Stop using the connection (idempotent); the last user of the file closes it."""
        shared, self._shared = self._shared, None
        if shared is not None:
            release(shared, self._key)

    # -- what the tables are ---------------------------------------------------------------

    def columns(self, table: str) -> list[tuple[str, str]]:
        """The table's (column, type) list, cached; empty when there is no such table."""
        shared = self.shared
        cached = shared.columns.get(table)
        if cached is not None:
            return cached
        rows = shared.con.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema='main' AND "
            "table_name=? ORDER BY ordinal_position", [table]).fetchall()
        columns = [(name, kind) for name, kind in rows]
        if columns:
            shared.columns[table] = columns
        return columns

    def tables(self) -> list[str]:
        return [row[0] for row in self.connection().execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='main' ORDER BY table_name").fetchall()]

    def meta(self, table: str) -> tuple[bool, str | None, int | None] | None:
        """(BM25 index stale, embedding model, dimension) as recorded for the table; None when unrecorded."""
        if self.read_only and self.meta_missing():
            return None
        row = self.connection().execute(
            f"SELECT fts_stale, embedding_model, dimension FROM {META}.tables WHERE name=?", [table]).fetchone()
        return None if row is None else (bool(row[0]), row[1], row[2])

    def meta_missing(self) -> bool:
        """A file made by another tool (or read-only before any write): no bookkeeping tables."""
        return self.connection().execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema=?", [META]).fetchone()[0] < 2

    # -- caches ----------------------------------------------------------------------------

    def schema_changed(self) -> None:
        shared = self.shared
        shared.columns.clear()
        shared.fresh_fulltext.clear()
        shared.vectors.clear()
        shared.embedders.clear()

    def written(self, table: str) -> None:
        """The table was written: its BM25 index is stale and its vectors in memory are dropped."""
        self.shared.fresh_fulltext.discard(table)
        self.shared.vectors.pop(table, None)

    def mark_stale(self, table: str) -> None:
        """Record (in the caller's transaction) that the table's BM25 index needs a rebuild."""
        self.connection().execute(f"INSERT INTO {META}.tables VALUES (?, TRUE, NULL, NULL) ON CONFLICT (name) DO "
                                  "UPDATE SET fts_stale = TRUE", [table])
        self.written(table)

    # -- DDL -------------------------------------------------------------------------------

    def create_table(self, table: str, columns: list[tuple[str, str]]) -> None:
        self.write_guard()
        self.connection().execute(f"CREATE TABLE IF NOT EXISTS {table} ({table_definition(columns)});")
        self.schema_changed()
        self.connection().execute(f"INSERT INTO {META}.tables VALUES (?, TRUE, NULL, NULL) ON CONFLICT (name) "
                                  "DO NOTHING", [table])

    def embedded_by(self, table: str) -> str | None:
        meta = self.meta(table)
        return meta[1] if meta else None

    def add_vector_column(self, table: str, dimension: int, embedder: str) -> None:
        con = self.connection()
        con.execute(f"ALTER TABLE {table} ADD COLUMN {q(self.vss_key)} FLOAT[{dimension}];")
        self.schema_changed()
        con.execute(f"INSERT INTO {META}.tables VALUES (?, TRUE, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "embedding_model = EXCLUDED.embedding_model, dimension = EXCLUDED.dimension",
                    [table, embedder, dimension])

    def checked_embedders(self) -> dict[str, str]:
        return self.shared.embedders

    def drop(self, table: str) -> bool:
        """Drop a table, its BM25 index and its bookkeeping; False when there was none."""
        if not self.columns(table):
            return False
        con = self.connection()
        self.drop_fulltext_index(table)
        con.execute(f"DROP TABLE IF EXISTS {table};")
        self.schema_changed()
        con.execute(f"DELETE FROM {META}.tables WHERE name=?", [table])
        return True

    def rename(self, old: str, new: str) -> None:
        self.write_guard()
        self.drop_fulltext_index(old)
        self.connection().execute(f"ALTER TABLE {old} RENAME TO {new};")
        self.schema_changed()
        self.connection().execute(f"UPDATE {META}.tables SET name = ?, fts_stale = TRUE WHERE name = ?", [new, old])

    def drop_fulltext_index(self, table: str) -> None:
        try:
            self.connection().execute(f"PRAGMA drop_fts_index('main.{table}');")
        except duckdb.Error:
            pass  # it had none

    def wipe(self) -> None:
        """Drop every table (and its index) and every setting."""
        self.write_guard()
        for table in self.tables():
            self.drop(table)
        self.connection().execute(f"DELETE FROM {META}.settings")

    # -- settings --------------------------------------------------------------------------

    def get_setting(self, key: str) -> str | None:
        if self.meta_missing():
            return None
        row = self.connection().execute(f"SELECT value FROM {META}.settings WHERE key=?", [key]).fetchone()
        return None if row is None else row[0]

    def set_setting(self, key: str, value: str) -> None:
        self.write_guard()
        self.connection().execute(f"INSERT INTO {META}.settings VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                                  "value = EXCLUDED.value", [key, value])

    def table_info(self) -> list[dict[str, Any]]:
        """Per table: name, rows, fields, vector dimension and the model that embedded it."""
        found = []
        for table in self.tables():
            meta = self.meta(table)
            found.append({"table": table, "rows": self.count(table),
                          "fields": [name for name, _ in self.columns(table) if name != self.vss_key],
                          "dimension": self.vector_dimension(table),
                          "embedding_model": meta[1] if meta else None})
        return found

    def count(self, table: str) -> int:
        """How many rows a table holds (0 when there is no such table)."""
        if not self.columns(table):
            return 0
        return int(self.connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    # -- rows out --------------------------------------------------------------------------

    def select_list(self, table: str, remove_embedding: bool = True) -> str:
        if remove_embedding and self.vector_dimension(table) is not None:
            return f"* EXCLUDE ({q(self.vss_key)})"
        return "*"

    def rows_with_keys(self, table: str, ids: list[Any], remove_embedding: bool = True) -> list[dict[str, Any]]:
        """The rows holding these keys, decoded (in no particular order)."""
        key = q(self.columns(table)[0][0])
        return self.fetch(table, f"SELECT {self.select_list(table, remove_embedding)} FROM {table} WHERE "
                                 f"{key} IN ({placeholders(len(ids))})", ids, remove_embedding)

    def page(self, table: str, filters: dict[str, Any] | None, limit: int, offset: int,
             remove_embedding: bool = True) -> list[dict[str, Any]]:
        """Rows matching ``filters`` in key order, ``limit`` of them after ``offset``."""
        where, params = where_clause(table, self.columns(table), filters)
        return self.fetch(table, f"SELECT {self.select_list(table, remove_embedding)} FROM {table} WHERE "
                                 f"TRUE{where} ORDER BY {q(self.columns(table)[0][0])} LIMIT ? OFFSET ?",
                          params + [limit, offset], remove_embedding)

    def existing_keys(self, table: str, ids: list[Any]) -> set[Any]:
        key = q(self.columns(table)[0][0])
        rows = self.connection().execute(f"SELECT {key} FROM {table} WHERE {key} IN ({placeholders(len(ids))})",
                                         ids).fetchall()
        return {row[0] for row in rows}

    def regex_matches(self, table: str, strings: list[str], pattern: str, case_sensitive: bool, k: int,
                      filters: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The first ``k`` rows (key order) where DuckDB's ``regexp_matches`` (RE2) matches one of ``strings``."""
        columns = self.columns(table)
        flags = "" if case_sensitive else "i"
        where, params = where_clause(table, columns, filters)
        matches = " OR ".join(f"regexp_matches({q(name)}, ?, ?)" for name in strings)
        return self.fetch(table, f"SELECT {self.select_list(table)} FROM {table} WHERE ({matches}){where} "
                                 f"ORDER BY {q(columns[0][0])} LIMIT ?",
                          [value for _ in strings for value in (pattern, flags)] + params + [k])

    def fetch(self, table: str, sql: str, params: list[Any], remove_embedding: bool = True) -> list[dict[str, Any]]:
        """Run a query over ``table`` and decode its rows."""
        arrow = self.connection().execute(sql, params).arrow().read_all()
        return self.rows(table, arrow, remove_embedding)
