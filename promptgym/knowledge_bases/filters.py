"""Search and listing filters -> a SQL ``WHERE`` fragment with bound values.

    >>> where_clause("Doc", [("id", "VARCHAR"), ("source", "VARCHAR")], {"source": ["a.md", "b.md"]})
    (' AND "source" IN (?, ?)', ['a.md', 'b.md'])
"""

from __future__ import annotations

from typing import Any

from promptgym.knowledge_bases.naming import column_identifier, q


def checked_filters(table: str, columns: list[tuple[str, str]],
                    filters: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """(column, value) per filter; an unknown field is an error naming it (every adapter's filters pass here)."""
    known = {name for name, _ in columns}
    checked = []
    for key, value in (filters or {}).items():
        column = column_identifier(key)
        if column not in known:
            raise ValueError(f"filters: table {table!r} has no field {key!r}; its fields: {sorted(known)}")
        checked.append((column, list(value) if isinstance(value, (list, tuple, set)) else value))
    return checked


def where_clause(table: str, columns: list[tuple[str, str]],
                 filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """``AND col = ?`` per filter (a list means ``IN``, None ``IS NULL``); an unknown field is an error naming it."""
    if not filters:
        return "", []
    clauses, params = [], []
    for column, value in checked_filters(table, columns, filters):
        if isinstance(value, list):
            clauses.append(f"{q(column)} IN ({placeholders(len(value))})" if value else "FALSE")
            params += value
        elif value is None:
            clauses.append(f"{q(column)} IS NULL")
        else:
            clauses.append(f"{q(column)} = ?")
            params.append(value)
    return " AND " + " AND ".join(clauses), params


def placeholders(count: int) -> str:
    """``?, ?, ?`` for ``count`` bound values."""
    return ", ".join("?" * count)
