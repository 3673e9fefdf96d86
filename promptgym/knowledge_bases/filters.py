"""Search and listing filters -> a SQL ``WHERE`` fragment with bound values.

    >>> where_clause("Doc", [("id", "VARCHAR"), ("source", "VARCHAR")], {"source": ["a.md", "b.md"]})
    (' AND "source" IN (?, ?)', ['a.md', 'b.md'])
"""

from __future__ import annotations

from typing import Any

from promptgym.knowledge_bases.naming import column_identifier, q


def where_clause(table: str, columns: list[tuple[str, str]],
                 filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """``AND col = ?`` per filter (a list means ``IN``, None ``IS NULL``); an unknown field is an error naming it."""
    if not filters:
        return "", []
    known = {name for name, _ in columns}
    clauses, params = [], []
    for key, value in filters.items():
        column = column_identifier(key)
        if column not in known:
            raise ValueError(f"filters: table {table!r} has no field {key!r}; its fields: {sorted(known)}")
        if isinstance(value, (list, tuple, set)):
            values = list(value)
            clauses.append(f"{q(column)} IN ({placeholders(len(values))})" if values else "FALSE")
            params += values
        elif value is None:
            clauses.append(f"{q(column)} IS NULL")
        else:
            clauses.append(f"{q(column)} = ?")
            params.append(value)
    return " AND " + " AND ".join(clauses), params


def placeholders(count: int) -> str:
    """``?, ?, ?`` for ``count`` bound values."""
    return ", ".join("?" * count)
