"""The query-side adapter of a retriever: a linear map on query vectors, stored as a variable's JSON value.

For an embedder whose weights can't train here (any but e5, or ``EmbedderTuning(weights="none")``; e5's own
query-side biases and LayerNorms train instead, see :mod:`promptgym.optimizers.query_bitfit`), what trains is
a ``d x d`` matrix ``W`` applied to each query vector before a vector or hybrid search; the documents keep the
vectors they were indexed with, so nothing is re-embedded. On e5 it never raised hybrid recall on the RAG
bench (docs/benchmarks.md, RAG sections 3-4). ``W`` starts as the identity; the variable's value is
``{"matrix": None}`` while the adapter is off (the default), else the matrix as base64 of little-endian
float32, row-major, with its dimension: plain data, so loading a program runs no code.

>>> value = adapter_value(np.eye(2, dtype=np.float32) * 2.0)
>>> check_adapter(value) is None, apply_adapter(value, [[1.0, 0.5]])
(True, [[2.0, 1.0]])
>>> apply_adapter(OFF, [[1.0, 0.5]])
[[1.0, 0.5]]
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

OFF: dict[str, Any] = {"matrix": None}
"""The adapter's value while it is off: queries are searched as embedded."""


def adapter_value(matrix: np.ndarray, **notes: Any) -> dict[str, Any]:
    """The variable's value for ``matrix`` (square), with JSON ``notes`` kept beside it (recall before/after...)."""
    matrix = np.asarray(matrix, dtype="<f4")
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"a query adapter is a square matrix, got shape {matrix.shape}")
    encoded = base64.b64encode(np.ascontiguousarray(matrix).tobytes()).decode("ascii")
    return {**notes, "dimension": int(matrix.shape[0]), "matrix": encoded}


def adapter_matrix(value: dict[str, Any]) -> np.ndarray | None:
    """The matrix a value holds (None when the adapter is off); a ValueError saying what is wrong otherwise."""
    encoded = value.get("matrix")
    if encoded is None:
        return None
    dimension = value.get("dimension")
    if not isinstance(dimension, int) or isinstance(dimension, bool) or dimension < 1:
        raise ValueError(f"query_adapter.dimension must be an integer >= 1, got {dimension!r}")
    if not isinstance(encoded, str):
        raise ValueError(f"query_adapter.matrix must be base64 text or null, got {type(encoded).__name__}")
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise ValueError(f"query_adapter.matrix is not valid base64: {error}") from None
    if len(raw) != dimension * dimension * 4:
        raise ValueError(f"query_adapter.matrix holds {len(raw)} bytes; a {dimension}x{dimension} float32 matrix "
                         f"is {dimension * dimension * 4}")
    matrix = np.frombuffer(raw, dtype="<f4").reshape(dimension, dimension).astype(np.float32)
    if not np.isfinite(matrix).all():
        raise ValueError("query_adapter.matrix holds a NaN or an infinity")
    return matrix


def check_adapter(value: dict[str, Any]) -> str | None:
    """What is wrong with a value (the variable refuses it), or None."""
    if not isinstance(value, dict) or "matrix" not in value:
        return f"query_adapter must be an object with a 'matrix' key (null when off), got {value!r:.80}"
    try:
        adapter_matrix(value)
    except ValueError as error:
        return str(error)
    return None


def apply_adapter(value: dict[str, Any], vectors: Any) -> list[list[float]]:
    """``W @ v`` for each query vector (unchanged when the adapter is off); a clear error on another dimension."""
    matrix = adapter_matrix(value)
    if matrix is None:
        return [[float(x) for x in vector] for vector in vectors]
    queries = np.asarray(vectors, dtype=np.float32)
    if queries.ndim != 2 or queries.shape[1] != matrix.shape[0]:
        raise ValueError(f"the query adapter is {matrix.shape[0]}-dimensional but the embedder gave vectors of "
                         f"shape {queries.shape}: retrain it for this embedder (EmbedderTuning)")
    return (queries @ matrix.T).tolist()
