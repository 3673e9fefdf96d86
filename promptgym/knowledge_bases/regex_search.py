"""Records whose string fields match an RE2 pattern (linear time, so a pattern an LM wrote is safe).

    rows = store.locked(regex_rows, store, "Document", "Par.s", None, True, 10)
"""

from __future__ import annotations

import warnings
from typing import Any

from promptgym.knowledge_bases.naming import column_identifier


def regex_rows(store: Any, table: str, pattern: str, fields: list[str] | None, case_sensitive: bool, k: int,
               filters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The first ``k`` rows (in key order) where any of the string ``fields`` (default: all) matches.

    ``store`` is either adapter's: its ``regex_matches`` runs the search in its engine (DuckDB's RE2, Lance's Rust
    regex; both linear time).
    """
    columns = store.require_columns(table)
    strings = regex_fields(table, columns, fields)
    if not strings:
        return []
    return store.regex_matches(table, strings, pattern, case_sensitive, k, filters)


def regex_fields(table: str, columns: list[tuple[str, str]], fields: list[str] | None) -> list[str]:
    """The string columns a regex searches (``fields``, default all); none is a warning (each adapter's)."""
    strings = [name for name, kind in columns if kind == "VARCHAR"]
    if fields is not None:
        wanted = {column_identifier(field) for field in fields}
        strings = [name for name in strings if name in wanted]
    if not strings:
        warnings.warn(f"Skipping regex search for {table}: no matching string fields.", stacklevel=5)
    return strings
