"""Search results as JSON rows or CSV text, BM25 scores on a [0, 1] scale, and rank fusion.

    >>> format_search_results([{"id": "a", "score": 1.0}], "csv").splitlines()
    ['"id","score"', '"a",1']
    >>> [row["id"] for row in reciprocal_rank_fusion([[{"id": "a"}, {"id": "b"}], [{"id": "b"}]], "id", k=2)]
    ['b', 'a']
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv

OUTPUT_FORMATS = ("json", "csv")


def format_search_results(rows: Any, output_format: str) -> Any:
    """``"json"``: a list of dicts; ``"csv"``: one header line and a line per row (``""`` when empty)."""
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"Unknown output_format {output_format!r}; expected one of {OUTPUT_FORMATS}.")
    if output_format == "json":
        return rows.to_pylist() if isinstance(rows, pa.Table) else rows
    if not isinstance(rows, pa.Table):
        if not rows:
            return ""
        rows = pa.Table.from_pylist(rows)
    buffer = io.BytesIO()
    pa_csv.write_csv(rows, buffer)
    return buffer.getvalue().decode("utf-8")


def minmax_normalize_scores(rows: list[dict[str, Any]], key: str = "score") -> list[dict[str, Any]]:
    """Rescale ``row[key]`` in place so the best is 1.0 and the worst 0.0 (BM25's raw range depends on the corpus)."""
    values = [row[key] for row in rows if row.get(key) is not None]
    if not values:
        return rows
    low, high = min(values), max(values)
    for row in rows:
        value = row.get(key)
        row[key] = 0.0 if value is None else 1.0 if high == low else (value - low) / (high - low)
    return rows


def reciprocal_rank_fusion(rankings: list[list[dict[str, Any]]], id_key: str, k: int,
                           k_rank: int = 60) -> list[dict[str, Any]]:
    """Merge ranked lists by ``sum(1 / (k_rank + rank))``; ``score`` holds the fused value, ties by id."""
    merged: dict[Any, dict[str, Any]] = {}
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            key = row[id_key]
            merged.setdefault(key, {}).update(row)
            scores[key] = scores.get(key, 0.0) + 1.0 / (k_rank + rank)
    for key, row in merged.items():
        row["score"] = scores[key]
    return sorted(merged.values(), key=lambda row: (-row["score"], str(row[id_key])))[:k]
