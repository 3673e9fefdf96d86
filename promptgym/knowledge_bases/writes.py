"""Writes to a knowledge base's tables: upserts by primary key and deletes, each one transaction.

    by_table = group_records(records, vss_key="embedding")
    store.locked(write_rows, store, by_table, "EmbeddingModel(local/multilingual-e5-small)")

A kill mid-write loses that write only, never a committed one: every write
runs between ``BEGIN`` and ``COMMIT`` (:func:`transaction`), and marks the
table's BM25 index stale in the same transaction.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import duckdb
import pyarrow as pa

from promptgym.core.json_data_model import JsonDataModel
from promptgym.knowledge_bases.columns import columns_for_schema, to_column_value
from promptgym.knowledge_bases.errors import KnowledgeBaseError
from promptgym.knowledge_bases.filters import placeholders, where_clause
from promptgym.knowledge_bases.naming import column_identifier, q, table_identifier
from promptgym.knowledge_bases.tables import SchemaReflection, TableStore

Rows = dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]
"""Per table: each record's (schema, column values)."""


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """``BEGIN`` ... ``COMMIT``, or ``ROLLBACK`` on any error (a KeyboardInterrupt included)."""
    con.execute("BEGIN TRANSACTION;")
    try:
        yield con
        con.execute("COMMIT;")
    except BaseException:
        con.execute("ROLLBACK;")
        raise


def on_conflict(columns: list[str], id_key: str) -> str:
    """``ON CONFLICT (key) DO UPDATE SET ...``: an insert that replaces the row holding the same key."""
    updates = ", ".join(f"{q(name)} = EXCLUDED.{q(name)}" for name in columns if name != id_key)
    return f"ON CONFLICT ({q(id_key)}) " + (f"DO UPDATE SET {updates}" if updates else "DO NOTHING")


def as_json_data_model(item: Any) -> JsonDataModel:
    if isinstance(item, JsonDataModel):
        return item
    if hasattr(item, "to_json_data_model"):
        return item.to_json_data_model()
    raise TypeError(f"update() takes DataModel or JsonDataModel records, got {type(item).__name__}")


def group_records(records: list[JsonDataModel], vss_key: str) -> tuple[Rows, list[Any]]:
    """Records by table (named by their schema's title) as column values, and their keys in order."""
    by_table: Rows = {}
    ids: list[Any] = []
    keys: dict[int, tuple[str, str]] = {}  # per distinct schema object: (table, primary key)
    for record in records:
        # Read in place: get_json() deep-copies, which cost most of a write's time for records with vectors.
        schema, json_value = record._schema, record._json  # noqa: SLF001 - same package, read only
        if id(schema) not in keys:
            if not schema.get("title"):
                raise ValueError("a record's schema has no `title`: it names the table")
            keys[id(schema)] = (table_identifier(schema["title"]), columns_for_schema(schema, vss_key)[0][0])
        table, id_key = keys[id(schema)]
        values = {column_identifier(key): value for key, value in json_value.items()}
        vector = values.get(vss_key)
        if isinstance(vector, (list, tuple)) and not vector:
            del values[vss_key]  # synalinks' `embedding: List[float] = []`: no vector yet (embedded if there is a model)
        if values.get(id_key) is None:
            raise ValueError(f"Primary key '{id_key}' is required but not provided (table {table!r})")
        ids.append(values[id_key])
        by_table.setdefault(table, []).append((schema, values))
    return by_table, ids


def text_to_embed(values: dict[str, Any], schema: dict[str, Any], vss_key: str) -> str:
    """What is embedded for a record without a vector: its string fields after the key, one per line."""
    columns = columns_for_schema(schema, vss_key)
    texts = [str(values[name]) for name, kind in columns[1:] if kind == "VARCHAR" and values.get(name)]
    return "\n".join(texts) or str(values[columns[0][0]])


def prepare_tables(store: SchemaReflection, by_table: Rows, embedder: str) -> None:
    """Create or check each table and its vector column (any store: the DuckDB or the LanceDB one)."""
    for table, rows in by_table.items():
        store.ensure_table(table, rows[0][0])
        dimensions = {len(values[store.vss_key]) for _, values in rows if values.get(store.vss_key) is not None}
        if len(dimensions) > 1:
            raise KnowledgeBaseError(f"table {table!r}: records carry vectors of several sizes {sorted(dimensions)}")
        if dimensions:
            store.check_dimension(table, dimensions.pop(), embedder)


def write_rows(store: TableStore, by_table: Rows, embedder: str) -> None:
    """Create or check each table and its vector column, then upsert every row in one transaction."""
    prepare_tables(store, by_table, embedder)
    with transaction(store.connection()):
        for table, rows in by_table.items():
            upsert(store, table, [values for _, values in rows])
            store.mark_stale(table)


def upsert(store: TableStore, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert or replace rows by key, as one Arrow batch (row by row when a column mixes Python types)."""
    types = dict(store.columns(table))
    id_key = next(iter(types))
    unknown = sorted({key for row in rows for key in row} - set(types))
    if unknown:
        raise KnowledgeBaseError(f"table {table!r} has no field(s) {unknown}; its fields: {sorted(types)}")
    latest: dict[Any, dict[str, Any]] = {}
    for row in rows:  # the last record of a key wins (one statement cannot update a row twice)
        latest[row[id_key]] = row
    columns = [name for name in types if any(name in row for row in latest.values())]
    data = {name: [to_column_value(row.get(name), types[name]) for row in latest.values()] for name in columns}
    listed = ", ".join(q(name) for name in columns)
    con = store.connection()
    try:
        batch = pa.table(data)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        con.executemany(f"INSERT INTO {table} ({listed}) VALUES ({placeholders(len(columns))}) "
                        f"{on_conflict(columns, id_key)};",
                        [[data[name][index] for name in columns] for index in range(len(latest))])
        return
    casts = ", ".join(f"CAST({q(name)} AS {types[name]})" for name in columns)
    with registered(con, batch) as name:
        con.execute(f"INSERT INTO {table} ({listed}) SELECT {casts} FROM {name} {on_conflict(columns, id_key)};")


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, batch: pa.Table) -> Iterator[str]:
    """The Arrow table as a view for the statements inside the block; its name."""
    name = "_promptgym_batch"
    con.register(name, batch)
    try:
        yield name
    finally:
        con.unregister(name)


def delete_keys(store: TableStore, table: str, ids: list[Any], where: dict[str, Any] | None = None,
                keep: bool = False) -> int:
    """Delete the rows with these keys (``keep=True``: every row matching ``where`` but these keys); how many."""
    columns = store.columns(table)
    if not columns:
        return 0
    id_key = q(columns[0][0])
    condition, params = where_clause(table, columns, where)
    if keep:
        keys = f" AND {id_key} NOT IN ({placeholders(len(ids))})" if ids else ""
    else:
        keys = f" AND {id_key} IN ({placeholders(len(ids))})"
    with transaction(store.connection()) as con:
        deleted = con.execute(f"DELETE FROM {table} WHERE TRUE{condition}{keys} RETURNING {id_key}",
                              params + list(ids)).fetchall()
        if deleted:
            store.mark_stale(table)
    return len(deleted)
