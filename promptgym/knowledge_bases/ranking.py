"""Merging the rows of several queries: each key once, at its best score, best first (ties by key).

    >>> best_per_key([{"id": "a", "score": 0.2}, {"id": "a", "score": 0.9}, {"id": "b", "score": 0.5}], "id", 2)
    [{'id': 'a', 'score': 0.9}, {'id': 'b', 'score': 0.5}]
    >>> [row["id"] for row in best_per_key([{"id": "a", "score": 0.2}, {"id": "b", "score": 0.1}], "id", 2,
    ...                                    lower_is_better=True)]
    ['b', 'a']
"""

from __future__ import annotations

from typing import Any


def best_per_key(rows: list[dict[str, Any]], id_key: str, k: int, *,
                 lower_is_better: bool = False) -> list[dict[str, Any]]:
    """The ``k`` best rows, one per ``row[id_key]`` (a distance when ``lower_is_better``)."""
    sign = 1.0 if lower_is_better else -1.0
    best: dict[Any, dict[str, Any]] = {}
    for row in rows:
        key = row[id_key]
        if key not in best or sign * row["score"] < sign * best[key]["score"]:
            best[key] = row
    return sorted(best.values(), key=lambda row: (sign * row["score"], str(row[id_key])))[:k]
