"""Contrastive training of a query-side linear map in numpy: InfoNCE over a positive, hard and in-batch negatives.

Each training row is a query vector ``q``, the vector of the chunk that holds its answer (the positive) and
vectors of chunks that do not (hard negatives, mined from the knowledge base). The other rows' positives are
in-batch negatives, except where a row shares the positive's chunk. The map ``W`` starts at the identity; the
loss is the cross-entropy of the positive among the candidates, scored by the cosine of ``W q`` with each
candidate over a temperature, plus ``l2 * ||W - I||^2`` so that a few dozen rows pull ``W`` only as far as they
must. Full-batch Adam: the rows are few (a training set), so no sampling.

>>> rng = np.random.default_rng(0)
>>> docs = rng.normal(size=(6, 4)).astype(np.float32)
>>> rows = [ContrastiveRow(query=docs[i] + 0.1, positive=docs[i], negatives=docs[[j for j in range(6) if j != i]],
...                        key=str(i)) for i in range(6)]
>>> result = train_query_map(rows, steps=50)
>>> result.matrix.shape, result.losses[-1] <= result.losses[0]
((4, 4), True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ContrastiveRow:
    """One query with the chunk that answers it (``key`` names that chunk) and chunks that do not."""

    query: np.ndarray
    positive: np.ndarray
    negatives: np.ndarray
    key: str


@dataclass
class QueryMapResult:
    matrix: np.ndarray
    losses: list[float] = field(default_factory=list)
    """The loss (without the l2 term) before the first step and after each step (``matrix`` is the lowest's)."""


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def contrastive_batch(rows: list[ContrastiveRow]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries (n, d); candidates (n, c, d) with the positive first; a mask (n, c) of the candidates that count."""
    count, width = len(rows), max(len(row.negatives) for row in rows)
    dimension = rows[0].query.shape[0]
    candidates = np.zeros((count, 1 + width + count, dimension), dtype=np.float64)
    mask = np.zeros((count, 1 + width + count), dtype=bool)
    positives = np.stack([row.positive for row in rows]).astype(np.float64)
    for i, row in enumerate(rows):
        candidates[i, 0] = row.positive
        candidates[i, 1:1 + len(row.negatives)] = row.negatives
        mask[i, :1 + len(row.negatives)] = True
        candidates[i, 1 + width:] = positives
        # another row's positive is a negative here unless it is this row's own chunk
        mask[i, 1 + width:] = [other.key != row.key for other in rows]
    return _unit(np.stack([row.query for row in rows]).astype(np.float64)), _unit(candidates), mask


def loss_and_gradient(matrix: np.ndarray, queries: np.ndarray, candidates: np.ndarray, mask: np.ndarray,
                      temperature: float) -> tuple[float, np.ndarray]:
    """The InfoNCE loss of ``matrix`` on a :func:`contrastive_batch`, and its gradient with respect to ``matrix``."""
    mapped = queries @ matrix.T                                   # u = W q, (n, d)
    norms = np.maximum(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-12)
    unit = mapped / norms
    logits = np.einsum("nd,ncd->nc", unit, candidates) / temperature
    logits = np.where(mask, logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=1, keepdims=True)
    loss = float(-np.log(np.maximum(weights[:, 0], 1e-30)).mean())
    target = np.zeros_like(weights)
    target[:, 0] = 1.0
    d_unit = np.einsum("nc,ncd->nd", weights - target, candidates) / temperature / len(queries)
    # through the normalisation: d(u/|u|)/du = (I - û ûᵀ) / |u|
    d_mapped = (d_unit - unit * (unit * d_unit).sum(axis=1, keepdims=True)) / norms
    return loss, d_mapped.T @ queries


def train_query_map(rows: list[ContrastiveRow], *, steps: int = 200, learning_rate: float = 0.0005,
                    temperature: float = 0.05, l2: float = 0.1) -> QueryMapResult:
    """``W`` (d x d, from the identity) that ranks each row's positive above its negatives (see the module doc);
    the step with the lowest training loss is the one returned (Adam can overshoot on a few rows)."""
    if not rows:
        raise ValueError("train_query_map: no rows to train on")
    queries, candidates, mask = contrastive_batch(rows)
    dimension = queries.shape[1]
    identity = np.eye(dimension)
    matrix = identity.copy()
    first, second = np.zeros_like(matrix), np.zeros_like(matrix)
    beta1, beta2 = 0.9, 0.999
    losses = [loss_and_gradient(matrix, queries, candidates, mask, temperature)[0]]
    best, best_loss = matrix.copy(), losses[0]
    for step in range(1, steps + 1):
        loss, gradient = loss_and_gradient(matrix, queries, candidates, mask, temperature)
        gradient = gradient + 2.0 * l2 * (matrix - identity)
        first = beta1 * first + (1 - beta1) * gradient
        second = beta2 * second + (1 - beta2) * gradient ** 2
        matrix -= learning_rate * (first / (1 - beta1 ** step)) / (np.sqrt(second / (1 - beta2 ** step)) + 1e-8)
        losses.append(loss_and_gradient(matrix, queries, candidates, mask, temperature)[0])
        if losses[-1] < best_loss:
            best, best_loss = matrix.copy(), losses[-1]
    return QueryMapResult(best.astype(np.float32), losses)
