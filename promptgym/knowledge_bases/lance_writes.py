"""Writes to a LanceDB knowledge base: upserts by primary key, deletes and file loads, each table one commit.

    store.locked(write_rows, store, group_records(records, "embedding")[0], "given vectors")

These have the signatures of :mod:`~promptgym.knowledge_bases.writes`' and
:mod:`~promptgym.knowledge_bases.bulk_load`'s DuckDB functions. A Lance
commit covers one table: an update that spans tables commits table by table
(each commit whole; nothing committed is lost), where DuckDB commits them
together.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from promptgym.knowledge_bases.bulk_load import prepare_table
from promptgym.knowledge_bases.lance_filters import column, literal, where
from promptgym.knowledge_bases.lance_store import LanceStore
from promptgym.knowledge_bases.writes import Rows, prepare_tables


def write_rows(store: LanceStore, by_table: Rows, embedder: str) -> None:
    """Create or check each table and its vector column, then upsert each table's rows as one commit."""
    prepare_tables(store, by_table, embedder)
    for table, rows in by_table.items():
        store.upsert(table, [values for _, values in rows])


def delete_keys(store: LanceStore, table: str, ids: list[Any], filters: dict[str, Any] | None = None,
                keep: bool = False) -> int:
    """Delete the rows with these keys (``keep=True``: every row matching ``filters`` but these keys); how many."""
    columns = store.columns(table)
    if not columns:
        return 0
    keys = f"{column(columns[0][0])} IN ({', '.join(literal(key) for key in ids)})" if ids else "FALSE"
    condition = where(table, columns, filters, f"NOT ({keys})" if keep else keys)
    return store.delete(table, condition or "TRUE")


def load_rows(store: LanceStore, table: str, path: str, batch: pa.Table, columns: list[tuple[str, str]]) -> None:
    """Create the table from the file's columns if it is new, then upsert the rows as one commit."""
    prepare_table(store, table, path, columns)
    store.upsert(table, batch.to_pylist())
