"""``LanceStore``: a knowledge base's tables in a LanceDB directory: DDL, schema checks, upserts, filtered reads.

    store = LanceStore(lancedb.connect("kb.lance"), "kb.lance", vss_key="embedding", read_only=False)
    store.locked(store.ensure_table, "Document", Document.get_schema())
    store.columns("Document")       # [('id', 'VARCHAR'), ('text', 'VARCHAR')]

Columns keep the DuckDB store's type vocabulary (``VARCHAR``, ``BIGINT``,
``FLOAT[d]``...), recorded in a bookkeeping table, so schemas, checks and row
decoding are shared with :class:`~promptgym.knowledge_bases.tables.TableStore`
(:class:`~promptgym.knowledge_bases.tables.SchemaReflection`). Every write is
one Lance commit (a new dataset version): a kill mid-write loses that write
only. One lock per directory serializes this process's statements.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import pyarrow as pa

from promptgym.knowledge_bases.columns import to_column_value
from promptgym.knowledge_bases.errors import KnowledgeBaseError
from promptgym.knowledge_bases.lance_filters import column, literal, where
from promptgym.knowledge_bases.tables import SchemaReflection

T = TypeVar("T")
META = "_promptgym_meta"
"""The bookkeeping table (a name no DataModel title gives: titles become PascalCase)."""
_SCALAR_TYPES = {"VARCHAR": pa.string(), "JSON": pa.string(), "DOUBLE": pa.float64(), "FLOAT": pa.float32(),
                 "BIGINT": pa.int64(), "INTEGER": pa.int32(), "BOOLEAN": pa.bool_(), "DATE": pa.date32(),
                 "TIMESTAMP": pa.timestamp("us"), "TIME": pa.time64("us")}
_PARSERS: dict[str, Callable[[str], Any]] = {
    "DATE": datetime.date.fromisoformat, "TIMESTAMP": datetime.datetime.fromisoformat,
    "TIME": datetime.time.fromisoformat}
_SHARED: dict[str, "SharedState"] = {}
_SHARED_LOCK = threading.Lock()


def arrow_type(kind: str) -> pa.DataType:
    """The Arrow type a column of this (DuckDB-vocabulary) type is stored as in Lance.

    >>> arrow_type("VARCHAR[]"), arrow_type("FLOAT[3]")
    (ListType(list<item: string>), FixedSizeListType(fixed_size_list<item: float>[3]))
    """
    if kind.startswith("FLOAT[") and kind.endswith("]"):
        return pa.list_(pa.float32(), int(kind[6:-1]))
    if kind.endswith("[]"):
        return pa.list_(arrow_type(kind[:-2]))
    if kind not in _SCALAR_TYPES:
        raise KnowledgeBaseError(f"LanceDB tables cannot store a column of type {kind}")
    return _SCALAR_TYPES[kind]


def lance_value(value: Any, kind: str) -> Any:
    """A JSON value as Lance takes it: JSON text for objects, parsed dates for date columns."""
    value = to_column_value(value, kind)
    if isinstance(value, str) and kind in _PARSERS:
        return _PARSERS[kind](value)
    return value


@dataclass
class SharedState:
    """What every adapter on one directory in this process shares: its lock and what it knows of the tables.

    Lance commits are atomic, but a check-then-write (a table's columns, then its rows) is not: one lock per
    directory serializes them, and one copy of the bookkeeping keeps two adapters on a directory agreeing.
    """

    lock: threading.RLock = field(default_factory=threading.RLock)
    meta: dict[str, dict[str, Any]] | None = None
    embedders: dict[str, str] = field(default_factory=dict)
    fresh_fulltext: set[str] = field(default_factory=set)


def shared_state(uri: str) -> SharedState:
    with _SHARED_LOCK:
        return _SHARED.setdefault(os.path.realpath(uri), SharedState())


class LanceStore(SchemaReflection):
    """The tables of one LanceDB directory, with what each records about itself (columns, embedder)."""

    def __init__(self, db: Any, uri: str, *, vss_key: str, read_only: bool) -> None:
        self.db, self.uri, self.vss_key, self.read_only = db, uri, vss_key, read_only
        self.shared = shared_state(uri)
        self.lock = self.shared.lock
        self.fresh_fulltext = self.shared.fresh_fulltext

    def locked(self, function: Callable[..., T], *args: Any) -> T:
        with self.lock:
            return function(*args)

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function`` under the lock, off the event loop."""
        return await asyncio.to_thread(self.locked, function, *args)

    def close(self) -> None:
        """Nothing to release: LanceDB opens files per operation. The bookkeeping is read again on next use, so a
        knowledge base reopened after another process wrote the directory sees its tables."""
        with self.lock:
            self.shared.meta = None
            self.shared.embedders.clear()
            self.fresh_fulltext.clear()

    # -- bookkeeping -----------------------------------------------------------------------

    def _table_names(self) -> list[str]:
        names: list[str] = []
        token = None
        while True:
            page = self.db.list_tables(page_token=token)
            names += page.tables
            token = page.page_token
            if not token:
                return names

    def metadata(self) -> dict[str, dict[str, Any]]:
        """Per key (``table:<name>`` or ``setting:<name>``), what was recorded (read once, then kept current)."""
        if self.shared.meta is None:
            meta = {}
            if META in self._table_names():
                for row in self.db.open_table(META).to_arrow().to_pylist():
                    meta[row["key"]] = json.loads(row["value"])
            self.shared.meta = meta
        return self.shared.meta

    def record(self, key: str, value: dict[str, Any] | None) -> None:
        """Record (or with None forget) one entry, as one commit."""
        self.write_guard()
        if META not in self._table_names():
            self.db.create_table(META, schema=pa.schema([("key", pa.string()), ("value", pa.string())]))
        table = self.db.open_table(META)
        if value is None:
            table.delete(f"key = {literal(key)}")
            self.metadata().pop(key, None)
            return
        (table.merge_insert("key").when_matched_update_all().when_not_matched_insert_all()
         .execute(pa.table({"key": [key], "value": [json.dumps(value)]})))
        self.metadata()[key] = value

    # -- what the tables are ---------------------------------------------------------------

    def tables(self) -> list[str]:
        return sorted(key[6:] for key in self.metadata() if key.startswith("table:"))

    def columns(self, table: str) -> list[tuple[str, str]]:
        entry = self.metadata().get(f"table:{table}")
        if entry is None:
            return []
        dimension = entry.get("dimension")
        vector = [(self.vss_key, f"FLOAT[{dimension}]")] if dimension else []
        return [(name, kind) for name, kind in entry["columns"]] + vector

    def embedded_by(self, table: str) -> str | None:
        return (self.metadata().get(f"table:{table}") or {}).get("embedding_model")

    def checked_embedders(self) -> dict[str, str]:
        return self.shared.embedders

    def open(self, table: str) -> Any:
        return self.db.open_table(table)

    # -- DDL -------------------------------------------------------------------------------

    def create_table(self, table: str, columns: list[tuple[str, str]]) -> None:
        self.write_guard()
        schema = pa.schema([(name, arrow_type(kind)) for name, kind in columns])
        self.db.create_table(table, schema=schema, exist_ok=True)
        self.record(f"table:{table}", {"columns": [list(column) for column in columns]})

    def add_vector_column(self, table: str, dimension: int, embedder: str) -> None:
        self.open(table).add_columns(pa.schema([pa.field(self.vss_key, arrow_type(f"FLOAT[{dimension}]"))]))
        entry = dict(self.metadata()[f"table:{table}"], dimension=dimension, embedding_model=embedder)
        self.record(f"table:{table}", entry)

    def drop(self, table: str) -> bool:
        if not self.columns(table):
            return False
        self.write_guard()
        self.db.drop_table(table, ignore_missing=True)
        self.record(f"table:{table}", None)
        self.shared.embedders.pop(table, None)
        self.fresh_fulltext.discard(table)
        return True

    def rename(self, old: str, new: str) -> None:
        raise NotImplementedError("LanceDB (open source) cannot rename a table; rename() can only change "
                                  "a LanceDB table's description. Use the DuckDB adapter, or copy the rows.")

    def wipe(self) -> None:
        self.write_guard()
        for table in self.tables():
            self.drop(table)
        for key in [key for key in self.metadata() if key.startswith("setting:")]:
            self.record(key, None)

    def get_setting(self, key: str) -> str | None:
        entry = self.metadata().get(f"setting:{key}")
        return None if entry is None else entry["value"]

    def set_setting(self, key: str, value: str) -> None:
        self.record(f"setting:{key}", {"value": value})

    def count(self, table: str) -> int:
        return int(self.open(table).count_rows()) if self.columns(table) else 0

    def table_info(self) -> list[dict[str, Any]]:
        """Per table: name, rows, fields, vector dimension and the model that embedded it."""
        return [{"table": table, "rows": self.count(table),
                 "fields": [name for name, _ in self.columns(table) if name != self.vss_key],
                 "dimension": self.vector_dimension(table), "embedding_model": self.embedded_by(table)}
                for table in self.tables()]

    # -- rows ------------------------------------------------------------------------------

    def upsert(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert or replace rows by key (the first column), as one commit; the last record of a key wins."""
        columns = self.columns(table)
        id_key = columns[0][0]
        unknown = sorted({key for row in rows for key in row} - {name for name, _ in columns})
        if unknown:
            raise KnowledgeBaseError(f"table {table!r} has no field(s) {unknown}; its fields: "
                                     f"{sorted(name for name, _ in columns)}")
        latest = {row[id_key]: row for row in rows}
        # Only the columns some record carries: a replaced row keeps the others (its vector, say), as on DuckDB.
        present = [(name, kind) for name, kind in columns if any(name in row for row in latest.values())]
        schema = pa.schema([(name, arrow_type(kind)) for name, kind in present])
        batch = pa.table({name: pa.array([lance_value(row.get(name), kind) for row in latest.values()],
                                         type=schema.field(name).type) for name, kind in present}, schema=schema)
        (self.open(table).merge_insert(id_key).when_matched_update_all().when_not_matched_insert_all()
         .execute(batch))
        self.fresh_fulltext.discard(table)

    def delete(self, table: str, condition: str) -> int:
        """Delete the rows matching a Lance filter; how many."""
        handle = self.open(table)
        found = int(handle.count_rows(condition))
        if found:
            handle.delete(condition)
            self.fresh_fulltext.discard(table)
        return found

    def scan(self, table: str, condition: str | None, columns: list[str] | None = None) -> pa.Table:
        """Every row matching a Lance filter (all of them with None), in no particular order."""
        handle = self.open(table)
        total = int(handle.count_rows())
        if total == 0:
            return handle.search().limit(1).to_arrow().slice(0, 0)
        query = handle.search()
        if condition:
            query = query.where(condition)
        if columns is not None:
            query = query.select(columns)
        return query.limit(total).to_arrow()

    def rows_with_keys(self, table: str, ids: list[Any], remove_embedding: bool = True) -> list[dict[str, Any]]:
        """The rows holding these keys, decoded (in no particular order)."""
        return self.rows(table, self.scan(table, self.key_condition(table, ids)), remove_embedding)

    def page(self, table: str, filters: dict[str, Any] | None, limit: int, offset: int,
             remove_embedding: bool = True) -> list[dict[str, Any]]:
        """Rows matching ``filters`` in key order, ``limit`` of them after ``offset``."""
        return self.sorted_rows(table, where(table, self.columns(table), filters), remove_embedding,
                                limit=limit, offset=offset)

    def existing_keys(self, table: str, ids: list[Any]) -> set[Any]:
        found = self.scan(table, self.key_condition(table, ids), [self.columns(table)[0][0]])
        return set(found.column(0).to_pylist())

    def sorted_rows(self, table: str, condition: str | None, remove_embedding: bool = True, *,
                    limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
        """Matching rows in key order, paginated, decoded as JSON values.

        Lance scans in no order, so the keys alone are read and sorted first; only the page's rows are read whole.
        """
        id_key = self.columns(table)[0][0]
        keys = self.scan(table, condition, [id_key]).sort_by(id_key).column(0)
        page = (keys.slice(offset, limit) if limit is not None else keys.slice(offset)).to_pylist()
        if not page:
            return []
        found = {row[id_key]: row for row in self.rows_with_keys(table, page, remove_embedding)}
        return [found[key] for key in page if key in found]

    def regex_matches(self, table: str, strings: list[str], pattern: str, case_sensitive: bool, k: int,
                      filters: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The first ``k`` rows (key order) where Lance's ``regexp_like`` (Rust regex) matches one of ``strings``."""
        flags = "" if case_sensitive else ", 'i'"
        matches = " OR ".join(f"regexp_like({column(name)}, {literal(pattern)}{flags})" for name in strings)
        return self.sorted_rows(table, where(table, self.columns(table), filters,
                                             f"({matches})"), limit=k)

    def key_condition(self, table: str, ids: list[Any]) -> str:
        return where(table, self.columns(table), {self.columns(table)[0][0]: list(ids)})
