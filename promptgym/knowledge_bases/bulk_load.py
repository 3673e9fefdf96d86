"""CSV, Parquet and JSON files into a knowledge-base table (created from the file's columns, rows upserted).

    arrow, columns = read_file("people.csv", csv_reader(",", "utf-8", header=True))
    store.locked(load_rows, store, "People", "people.csv", arrow, columns)

The knowledge base's own connection may not read files (it serves SQL an LM
wrote); a private in-memory connection reads the file into Arrow instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from promptgym.knowledge_bases.errors import KnowledgeBaseError
from promptgym.knowledge_bases.naming import column_identifier, q, table_identifier, to_pascal_case
from promptgym.knowledge_bases.tables import SchemaReflection, TableStore
from promptgym.knowledge_bases.writes import on_conflict, registered, transaction

PARQUET = "read_parquet(?)"
JSON_ARRAY = "read_json(?, format='array')"
JSON_LINES = "read_json(?, format='newline_delimited')"


def csv_reader(delimiter: str, encoding: str, header: bool) -> str:
    quote = "'" + delimiter.replace("'", "''") + "'"
    return (f"read_csv(?, delim={quote}, header={'true' if header else 'false'}, "
            f"encoding='{encoding.replace(chr(39), '')}')")


def target_table(path: str, table_name: str | None) -> str:
    """The table a file loads into: ``table_name``, else the file's stem, in PascalCase."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"File not found: {path}")
    raw = table_name if table_name is not None else Path(path).stem
    if not to_pascal_case(raw):
        raise ValueError(f"Cannot derive a table name from {raw!r}: after PascalCase normalization nothing is "
                         "left. Pass an explicit `table_name=`.")
    return table_identifier(raw)


def read_file(path: str, reader: str) -> tuple[pa.Table, list[tuple[str, str]]]:
    """The file's rows as Arrow, with its (column, type) list (column names in snake_case)."""
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:
        loaded = con.execute(f"SELECT * FROM {reader}", [path]).fetch_arrow_table()
        described = con.execute(f"DESCRIBE SELECT * FROM {reader}", [path]).fetchall()
    finally:
        con.close()
    if not described:
        raise ValueError(f"{path}: no columns detected in source file.")
    columns = [(column_identifier(row[0]), row[1]) for row in described]
    return loaded.rename_columns([name for name, _ in columns]), columns


def prepare_table(store: SchemaReflection, table: str, path: str,
                  columns: list[tuple[str, str]]) -> tuple[list[str], str]:
    """Create the table from the file's columns if it is new, else check it has them; (file columns, key)."""
    store.write_guard()
    if not store.columns(table):
        store.create_table(table, columns)
    existing = dict(store.columns(table))
    names = [name for name, _ in columns]
    missing = [name for name in names if name not in existing]
    if missing:
        raise KnowledgeBaseError(f"{path}: table {table!r} has no column(s) {missing}; its columns: {sorted(existing)}")
    return names, next(iter(existing))


def load_rows(store: TableStore, table: str, path: str, batch: pa.Table, columns: list[tuple[str, str]]) -> None:
    """Create the table from the file's columns if it is new, then upsert the rows in one transaction."""
    names, id_key = prepare_table(store, table, path, columns)
    con = store.connection()
    with registered(con, batch) as view, transaction(con):
        con.execute(f"INSERT INTO {table} ({', '.join(q(name) for name in names)}) SELECT * FROM {view} "
                    f"{on_conflict(names, id_key)};")
        store.mark_stale(table)
