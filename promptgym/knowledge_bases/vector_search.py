"""Exact nearest-neighbour search over a table's ``FLOAT[d]`` column: in memory unfiltered, in SQL with filters.

    rows = store.locked(similarity_rows, store, "Document", [[0.1, 0.2]], "cosine", 10, embedder="given vectors")

``score`` is the distance (lower is closer), the same value as DuckDB's
``array_cosine_distance`` / squared ``array_distance`` / ``array_negative_inner_product``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from promptgym.knowledge_bases.filters import placeholders, where_clause
from promptgym.knowledge_bases.naming import q
from promptgym.knowledge_bases.ranking import best_per_key
from promptgym.knowledge_bases.tables import TableStore
from promptgym.knowledge_bases.vector_matrix import VectorMatrix

METRICS = ("l2sq", "cosine", "ip")
DISTANCE_FUNCTIONS = {"l2sq": "array_distance", "cosine": "array_cosine_distance",
                      "ip": "array_negative_inner_product"}


def query_vectors(vector_or_vectors: Any) -> list[list[float]] | None:
    """One vector or a list of them as lists of floats; None for none.

    >>> query_vectors([1, 2]), query_vectors([[1, 2], [3, 4]]), query_vectors(None)
    ([[1.0, 2.0]], [[1.0, 2.0], [3.0, 4.0]], None)
    """
    if vector_or_vectors is None or len(vector_or_vectors) == 0:
        return None
    first = vector_or_vectors[0]
    if isinstance(first, (int, float, np.floating, np.integer)):
        return [[float(value) for value in vector_or_vectors]]
    return [[float(value) for value in vector] for vector in vector_or_vectors]


def vector_matrix(store: TableStore, table: str, id_key: str) -> VectorMatrix:
    """The table's vectors in memory (cached on the shared connection until the table is written)."""
    cached = store.shared.vectors.get(table)
    if cached is None:
        vss = q(store.vss_key)
        arrow = store.connection().execute(
            f"SELECT {q(id_key)}, {vss} FROM {table} WHERE {vss} IS NOT NULL").arrow().read_all().combine_chunks()
        dimension = store.vector_dimension(table) or 0
        flat = arrow.column(1).combine_chunks().flatten().to_numpy(zero_copy_only=False)
        cached = VectorMatrix.of(arrow.column(0).to_pylist(), flat.reshape(-1, dimension))
        store.shared.vectors[table] = cached
    return cached


def similarity_rows(store: TableStore, table: str, vectors: list[list[float]], metric: str, k: int, *,
                    embedder: str, threshold: float | None = None,
                    filters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The ``k`` nearest rows over all query vectors (each row at its smallest distance)."""
    columns = store.require_columns(table)
    dimension = store.vector_dimension(table)
    if dimension is None:
        return []  # nothing embedded yet
    store.check_query_embedder(table, len(vectors[0]), embedder)  # another size or model: an error naming both
    id_key = columns[0][0]
    if not filters:
        return _from_matrix(store, table, id_key, vectors, metric, k, threshold)
    distance = f"{DISTANCE_FUNCTIONS[metric]}({q(store.vss_key)}, ?::FLOAT[{dimension}])"
    score = f"power({distance}, 2)" if metric == "l2sq" else distance
    where, params = where_clause(table, columns, filters)
    sql = (f"SELECT * FROM (SELECT {store.select_list(table)}, {score} AS score FROM {table} WHERE "
           f"{q(store.vss_key)} IS NOT NULL{where}) " + ("WHERE score < ? " if threshold is not None else "") +
           f"ORDER BY score ASC, {q(id_key)} LIMIT ?")
    cutoff = [threshold] if threshold is not None else []
    found = [row for vector in vectors for row in store.fetch(table, sql, [vector, *params, *cutoff, k])]
    return best_per_key(found, id_key, k, lower_is_better=True)


def _from_matrix(store: TableStore, table: str, id_key: str, vectors: list[list[float]], metric: str, k: int,
                 threshold: float | None) -> list[dict[str, Any]]:
    """Nearest keys by one matrix product per query, then only those rows read from the file."""
    matrix = vector_matrix(store, table, id_key)
    nearest = [{id_key: key, "score": distance} for vector in vectors
               for key, distance in matrix.nearest(vector, metric, k, threshold)]
    ranked = best_per_key(nearest, id_key, k, lower_is_better=True)
    if not ranked:
        return []
    keys = [row[id_key] for row in ranked]
    rows = {row[id_key]: row for row in store.fetch(
        table, f"SELECT {store.select_list(table)} FROM {table} WHERE {q(id_key)} IN ({placeholders(len(keys))})",
        keys)}
    return [{**rows[row[id_key]], "score": row["score"]} for row in ranked if row[id_key] in rows]
