"""Search and listing filters -> a Lance filter expression (Lance binds no parameters: values become literals).

    >>> where("Doc", [("id", "VARCHAR"), ("source", "VARCHAR")], {"source": ["a.md", "it's.md"]})
    "`source` IN ('a.md', 'it''s.md')"
    >>> where("Doc", [("id", "VARCHAR"), ("n", "BIGINT")], {"n": 3, "id": None}, "`n` > 1")
    '`n` > 1 AND `n` = 3 AND `id` IS NULL'
"""

from __future__ import annotations

import datetime
from typing import Any

from promptgym.knowledge_bases.filters import checked_filters
from promptgym.knowledge_bases.naming import sanitize_identifier


def literal(value: Any) -> str:
    """A value as a Lance (DataFusion SQL) literal: strings quoted with ``'`` doubled, so no value is code."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (datetime.date, datetime.time)):
        value = value.isoformat()
    return "'" + str(value).replace("'", "''") + "'"


def column(name: str) -> str:
    """A checked column name quoted for a Lance filter."""
    return f"`{sanitize_identifier(name)}`"


def where(table: str, columns: list[tuple[str, str]], filters: dict[str, Any] | None,
          *conditions: str) -> str | None:
    """``conditions`` and one term per filter, joined by AND; None when there is nothing to filter on."""
    terms = list(conditions)
    for name, value in checked_filters(table, columns, filters):
        if isinstance(value, list):
            terms.append(f"{column(name)} IN ({', '.join(literal(item) for item in value)})" if value else "FALSE")
        elif value is None:
            terms.append(f"{column(name)} IS NULL")
        else:
            terms.append(f"{column(name)} = {literal(value)}")
    return " AND ".join(terms) if terms else None
