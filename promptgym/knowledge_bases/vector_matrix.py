"""A table's vectors as one float32 matrix: unfiltered vector search is a matrix product, not a file scan.

    >>> matrix = VectorMatrix.of(["a", "b"], [[1.0, 0.0], [0.0, 1.0]])
    >>> matrix.nearest([1.0, 0.1], "cosine", k=1, threshold=None)[0][0]
    'a'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class VectorMatrix:
    """A table's keys and vectors as a float32 matrix: one matrix product per query instead of a scan of the file.

    On the shared 2-core machine a vector search over 100,000 rows took about 0.7 s as DuckDB scanned the
    file's FLOAT[384] column; with the matrix in memory it took 75 ms under a heavier load (docs/benchmarks.md).
    """

    keys: list[Any]
    matrix: np.ndarray
    norms: np.ndarray

    @classmethod
    def of(cls, keys: list[Any], vectors: Any) -> "VectorMatrix":
        matrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        return cls(list(keys), matrix, np.linalg.norm(matrix, axis=1))

    def nearest(self, vector: list[float], metric: str, k: int, threshold: float | None) -> list[tuple[Any, float]]:
        """The ``k`` closest keys and their distances (the same values DuckDB's distance functions give)."""
        query = np.asarray(vector, dtype=np.float32)
        dots = self.matrix @ query
        if metric == "cosine":
            denominator = self.norms * float(np.linalg.norm(query))
            scores = 1.0 - np.divide(dots, denominator, out=np.zeros_like(dots), where=denominator > 0)
        elif metric == "l2sq":
            scores = np.maximum(self.norms ** 2 - 2.0 * dots + float(query @ query), 0.0)
        else:
            scores = -dots
        candidates = np.flatnonzero(scores < threshold) if threshold is not None else np.arange(len(scores))
        if len(candidates) > k:
            candidates = candidates[np.argpartition(scores[candidates], k - 1)[:k]]
        return sorted(((self.keys[index], float(scores[index])) for index in candidates),
                      key=lambda pair: (pair[1], str(pair[0])))
