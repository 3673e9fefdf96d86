"""Dominated Novelty Search and the selection rules of OMEGA, as pure functions.

Dominated Novelty Search (Bahlous-Boldi et al., arXiv 2502.00593) replaces
the grid of MAP-Elites by a *competition*: a candidate survives when it is
either not beaten by anyone, or far (in descriptor space) from the
candidates that beat it::

    fitness   = [0.9, 0.5, 0.5]
    distances = [[0, .1, .8], [.1, 0, .7], [.8, .7, 0]]
    competition_scores(fitness, distances, k=1)   # -> [1.0, 0.1, 0.8]

Everything here but `compete_candidate_dicts` (which embeds first) works on plain
lists and numpy arrays, so it is easy to test
and to reuse (GEPA's Pareto front or a MAP-Elites ablation can share it).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

ALGORITHMS = ("dns", "ga")
SELECTIONS = ("softmax", "best", "random")
UNDOMINATED_SCORE = 1.0
"""The competition score of a candidate that no other candidate beats (the seed document's value)."""


def cosine_distance_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise ``1 - cos(u, v)`` of the rows of ``vectors`` (clipped to [0, 2], zero diagonal)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"expected an (n, d) array of vectors, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    distances = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
    np.fill_diagonal(distances, 0.0)
    return distances


def competition_scores(fitness: Sequence[float], distances: np.ndarray, k: int,
                       undominated_score: float = UNDOMINATED_SCORE) -> np.ndarray:
    """The DNS competition score of every candidate.

    For candidate ``i``, the fitter candidates are those with a strictly
    higher fitness. With none, ``i`` scores ``undominated_score``; otherwise
    its score is the mean distance to its ``k`` nearest fitter candidates
    (all of them when there are fewer than ``k``).
    """
    values = np.asarray(fitness, dtype=np.float64)
    matrix = np.asarray(distances, dtype=np.float64)
    if matrix.shape != (len(values), len(values)):
        raise ValueError(f"distances must be ({len(values)}, {len(values)}), got {matrix.shape}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    scores = np.empty(len(values))
    for i, own in enumerate(values):
        fitter = np.flatnonzero(values > own)
        if fitter.size == 0:
            scores[i] = undominated_score
        else:
            scores[i] = float(np.mean(np.sort(matrix[i, fitter])[:k]))
    return scores


def dns_survivors(fitness: Sequence[float], distances: np.ndarray, k: int, population_size: int,
                  protected: Sequence[int] = (), undominated_score: float = UNDOMINATED_SCORE) -> list[int]:
    """Indices of the candidates that survive a DNS competition, best competition score first.

    Keeps the candidates whose score is at least the median score, then the
    ``population_size`` highest (ties broken by fitness, then by position).
    Indices in ``protected`` (the incumbent best) always survive, taking the
    place of the weakest survivors if needed.
    """
    _check_population_size(population_size)
    if len(fitness) == 0:
        return []
    scores = competition_scores(fitness, distances, k, undominated_score)
    median = float(np.median(scores))
    kept = [i for i in range(len(scores)) if scores[i] >= median]
    kept.sort(key=lambda i: (-scores[i], -float(fitness[i]), i))
    return _with_protected(kept[:population_size], protected, population_size, key=lambda i: (-scores[i], -float(fitness[i]), i))


def ga_survivors(fitness: Sequence[float], population_size: int, protected: Sequence[int] = ()) -> list[int]:
    """Indices of the ``population_size`` fittest candidates (plain GA, no competition)."""
    _check_population_size(population_size)
    order = sorted(range(len(fitness)), key=lambda i: (-float(fitness[i]), i))
    return _with_protected(order[:population_size], protected, population_size, key=lambda i: (-float(fitness[i]), i))


def _with_protected(kept: list[int], protected: Sequence[int], population_size: int, key) -> list[int]:
    missing = [i for i in protected if i not in kept]
    if not missing:
        return kept
    room = max(population_size - len(missing), 0)
    return sorted(kept[:room] + missing, key=key)


def _check_population_size(population_size: int) -> None:
    if population_size < 1:
        raise ValueError(f"population_size must be >= 1, got {population_size}")


def softmax(values: Sequence[float], temperature: float) -> np.ndarray:
    """``exp(v / T)`` normalised, computed stably. ``temperature`` must be > 0."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    scaled = np.asarray(values, dtype=np.float64) / temperature
    if scaled.size == 0:
        return scaled
    weights = np.exp(scaled - scaled.max())
    return weights / weights.sum()


def selection_probabilities(fitness: Sequence[float], strategy: str, temperature: float) -> np.ndarray:
    """The probability of picking each candidate as a parent.

    ``softmax``: ``softmax(fitness / temperature)``; ``best``: uniform over the
    fittest (ties share); ``random``: uniform.
    """
    values = np.asarray(fitness, dtype=np.float64)
    if values.size == 0:
        raise ValueError("cannot select from an empty population")
    if strategy == "softmax":
        return softmax(values, temperature)
    if strategy == "best":
        top = (values == values.max()).astype(np.float64)
        return top / top.sum()
    if strategy == "random":
        return np.full(values.size, 1.0 / values.size)
    raise ValueError(f"unknown selection {strategy!r}; expected one of {', '.join(SELECTIONS)}")


def select_index(fitness: Sequence[float], strategy: str, temperature: float, rng: np.random.Generator) -> int:
    """Draw one candidate index with :func:`selection_probabilities`."""
    probabilities = selection_probabilities(fitness, strategy, temperature)
    return int(rng.choice(len(probabilities), p=probabilities))


def variable_probabilities(average_rewards: Sequence[float]) -> np.ndarray:
    """Probability of mutating each variable, proportional to ``exp(-average reward)``.

    The worst-rewarded variable is the likeliest, and every variable keeps a
    chance (rewards in [0, 1] bound the ratio of two probabilities by e).
    """
    return softmax([-float(r) for r in average_rewards], 1.0)


def crossover_probability(merging_rate: float, epoch: int) -> float:
    """``merging_rate * epoch`` (epoch counted from 0), capped at 1."""
    return float(min(max(merging_rate * epoch, 0.0), 1.0))


async def compete_candidate_dicts(candidates: list[dict[str, Any]], embedding_model: Any, k: int,
                                  population_size: int) -> list[dict[str, Any]]:
    """The candidate dicts (each with a ``reward``) that survive Dominated Novelty Search, in their order.

    Candidates are described by their JSON without the reward for the
    embedding distances; without an embedding model, or when embedding
    fails, the fittest ``population_size`` survive. The fittest always does.
    """
    if len(candidates) <= 1:
        return list(candidates)
    fitness = [float(candidate.get("reward") or 0.0) for candidate in candidates]
    protected = [int(np.argmax(fitness))]
    try:
        if embedding_model is None:
            raise ValueError("no embedding model")
        texts = [json.dumps({key: v for key, v in c.items() if key != "reward"}, sort_keys=True) for c in candidates]
        vectors = await embedding_model(texts)
        vectors = np.asarray(vectors.get("embeddings") if isinstance(vectors, dict) else vectors, dtype=float)
        if vectors.shape[0] != len(candidates):
            raise ValueError(f"{vectors.shape[0]} embeddings for {len(candidates)} candidates")
        keep = dns_survivors(fitness, cosine_distance_matrix(vectors), k, population_size, protected)
    except Exception:  # noqa: BLE001 - no usable distances: keep the fittest
        keep = ga_survivors(fitness, population_size, protected)
    return [candidates[i] for i in sorted(keep)]
