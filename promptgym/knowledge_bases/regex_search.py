"""Records whose string fields match an RE2 pattern (linear time, so a pattern an LM wrote is safe).

    rows = store.locked(regex_rows, store, "Document", "Par.s", None, True, 10)
"""

from __future__ import annotations

import warnings
from typing import Any

from promptgym.knowledge_bases.filters import where_clause
from promptgym.knowledge_bases.naming import column_identifier, q
from promptgym.knowledge_bases.tables import TableStore


def regex_rows(store: TableStore, table: str, pattern: str, fields: list[str] | None, case_sensitive: bool, k: int,
               filters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The first ``k`` rows (in key order) where any of the string ``fields`` (default: all) matches."""
    columns = store.require_columns(table)
    strings = regex_fields(table, columns, fields)
    if not strings:
        return []
    flags = "" if case_sensitive else "i"
    where, params = where_clause(table, columns, filters)
    matches = " OR ".join(f"regexp_matches({q(name)}, ?, ?)" for name in strings)
    return store.fetch(table, f"SELECT {store.select_list(table)} FROM {table} WHERE ({matches}){where} "
                              f"ORDER BY {q(columns[0][0])} LIMIT ?",
                       [value for _ in strings for value in (pattern, flags)] + params + [k])


def regex_fields(table: str, columns: list[tuple[str, str]], fields: list[str] | None) -> list[str]:
    """The string columns a regex searches (``fields``, default all); none is a warning (each adapter's)."""
    strings = [name for name, kind in columns if kind == "VARCHAR"]
    if fields is not None:
        wanted = {column_identifier(field) for field in fields}
        strings = [name for name in strings if name in wanted]
    if not strings:
        warnings.warn(f"Skipping regex search for {table}: no matching string fields.", stacklevel=5)
    return strings
