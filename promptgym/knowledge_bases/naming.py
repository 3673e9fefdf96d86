"""Table and column names: PascalCase tables, snake_case columns, checked before they reach SQL.

Names are interpolated into DDL (DuckDB binds values, not identifiers), so
every one goes through these functions first, as synalinks' adapters do:

    >>> to_pascal_case("my-articles"), to_snake_case("First Name")
    ('MyArticles', 'first_name')
    >>> table_identifier("bad name; DROP TABLE x;")
    'BadNameDropTableX'
"""

from __future__ import annotations

import re
from functools import lru_cache

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def to_pascal_case(text: str) -> str:
    return "".join(word.capitalize() for word in _WORDS.findall(text or ""))


def to_snake_case(text: str) -> str:
    return "_".join(word.lower() for word in _WORDS.findall(text or ""))


def sanitize_identifier(name: str) -> str:
    """``name`` if it is a bare ASCII identifier, else a ValueError naming it."""
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise ValueError(f"Invalid identifier: {name!r} (expected letters, digits and '_', not starting with a digit)")
    return name


def q(name: str) -> str:
    """A checked column name quoted for SQL, so fields called ``end`` or ``order`` are columns, not keywords."""
    return '"' + sanitize_identifier(name) + '"'


@lru_cache(maxsize=4096)
def table_identifier(name: str) -> str:
    return sanitize_identifier(to_pascal_case(name))


@lru_cache(maxsize=4096)
def column_identifier(name: str) -> str:
    return sanitize_identifier(to_snake_case(name))
