"""OMEGA's population: which candidates are alive, how a parent is drawn, and the epoch's competition.

The competition is Dominated Novelty Search (:mod:`promptgym.optimizers.dns`) over the distances a
:class:`CandidateDistances` gives (cosine distance of embeddings, or a user's ``distance_function``), or plain
GA truncation. Both parts work alone, on candidates made by hand::

    population = Population(CandidateDistances(distance_function=by_length), k_nearest_fitter=1)
    population.ids = [candidate.id for candidate in candidates]
    await population.compete(candidates, fitness, best=candidates[0], size=2, emit=events.append)
    population.ids, population.scores      # the survivors and their competition scores
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import numpy as np

from promptgym.core.events import OptimizerError, PopulationUpdated
from promptgym.lm.usage import lm_phase
from promptgym.optimizers.base import Candidate
from promptgym.optimizers.dns import (
    competition_scores,
    cosine_distance_matrix,
    dns_survivors,
    ga_survivors,
    selection_probabilities,
)
from promptgym.optimizers.omega_prompts import candidate_text

logger = logging.getLogger("promptgym")

DistanceFunction = Callable[..., Awaitable[float]]
Fitness = Callable[[Candidate], float]
Emit = Callable[[Any], Awaitable[None]]


async def similarity_distance(candidate1: dict[str, Any], candidate2: dict[str, Any], embedding_model: Any = None,
                              axis: int = -1) -> float:
    """The distance of two candidates' values, from 0 (same direction) to 1 (opposite): each value's leaves are
    embedded, normalised and averaged, and the distance is ``(1 - cosine) / 2`` (synalinks' default
    ``distance_function``; pass it as ``OMEGA(distance_function=similarity_distance)``)."""
    if embedding_model is None:
        raise ValueError("similarity_distance needs an embedding_model (OMEGA passes its own)")
    first, second = [mean_direction(await embedding_model(leaf_texts(c)), axis) for c in (candidate1, candidate2)]
    return float(1.0 - (float(np.sum(first * second, axis=axis)) + 1.0) / 2.0)


def leaf_texts(value: Any) -> list[str]:
    """Every leaf of a JSON value, as text (a dict's keys are not leaves).

    >>> leaf_texts({"instructions": "Be brief.", "examples": [1, {"a": True}]})
    ['Be brief.', '1', 'True']
    """
    if isinstance(value, dict):
        return [text for item in value.values() for text in leaf_texts(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in leaf_texts(item)]
    return [str(value)]


def mean_direction(embeddings: Any, axis: int = -1) -> np.ndarray:
    """The mean of unit-normalised embedding rows (an array, or ``{"embeddings": [...]}``), normalised again."""
    rows = embeddings.get("embeddings") if isinstance(embeddings, dict) else embeddings
    vectors = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=axis, keepdims=True), 1e-12)
    mean = vectors.mean(axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


class CandidateDistances:
    """Pairwise distances between candidates: ``distance_function`` on their variables, or the cosine distance
    of their embeddings (one vector per candidate, computed once)."""

    def __init__(self, embedding_model: Any = None, distance_function: DistanceFunction | None = None) -> None:
        self.embedding_model = embedding_model
        self.distance_function = distance_function
        self.embeddings: dict[int, np.ndarray] = {}

    async def matrix(self, members: list[Candidate]) -> np.ndarray:
        if self.distance_function is None:
            return cosine_distance_matrix(await self.vectors(members))
        size = len(members)
        matrix = np.zeros((size, size))
        with lm_phase("optimizer"):
            for i in range(size):
                for j in range(i + 1, size):
                    value = await self.distance_function(members[i].variables, members[j].variables,
                                                         embedding_model=self.embedding_model)
                    matrix[i, j] = matrix[j, i] = float(value)
        return matrix

    async def vectors(self, members: list[Candidate]) -> np.ndarray:
        """One vector per candidate, computed once (one batched call for the new ones) and cached."""
        missing = [c for c in members if c.id not in self.embeddings]
        if missing:
            if self.embedding_model is None:
                raise ValueError("OMEGA needs an embedding_model for DNS distances")
            with lm_phase("optimizer"):
                vectors = await self.embedding_model([candidate_text(c.variables) for c in missing])
            for candidate, vector in zip(missing, vectors):
                self.embeddings[candidate.id] = np.asarray(vector, dtype=np.float64)
        return np.stack([self.embeddings[c.id] for c in members])


class Population:
    """The ids of the living candidates, parent selection, and the competition that decides who survives."""

    def __init__(self, distances: CandidateDistances, k_nearest_fitter: int = 5, algorithm: str = "dns") -> None:
        self.distances = distances
        self.k_nearest_fitter = k_nearest_fitter
        self.algorithm = algorithm
        self.ids: list[int] = []
        self.scores: dict[int, float] = {}
        """The last competition's DNS score of each candidate (empty after a GA one)."""

    def members(self, lookup: Callable[[int], Candidate]) -> list[Candidate]:
        return [lookup(i) for i in dict.fromkeys(self.ids)]

    @staticmethod
    def select(members: list[Candidate], fitness: Fitness, strategy: str, temperature: float,
               rng: np.random.Generator) -> Candidate:
        """A parent among ``members``: ``strategy`` is ``"softmax"`` (at ``temperature``), ``"best"`` or ``"random"``."""
        probabilities = selection_probabilities([fitness(c) for c in members], strategy, temperature)
        return members[int(rng.choice(len(members), p=probabilities))]

    async def compete(self, members: list[Candidate], fitness: Fitness, best: Candidate, size: int,
                      emit: Emit) -> None:
        """Dominated Novelty Search (or GA truncation) over ``members``; ``best`` always survives.

        Sets :attr:`ids` to the ``size`` (at most) survivors and emits a ``PopulationUpdated`` event.
        """
        members = list(members)
        if best not in members:
            members.append(best)
        values = [fitness(c) for c in members]
        protected = [members.index(best)]
        algorithm = self.algorithm
        scores: dict[int, float] = {}
        if algorithm == "dns" and len(members) > 1:
            try:
                distances = await self.distances.matrix(members)
            except Exception as error:  # an embedding failure degrades to GA for this epoch
                logger.warning("OMEGA: distances failed (%s: %s); keeping the fittest this epoch",
                               type(error).__name__, error)
                await emit(OptimizerError(optimizer="OMEGA", stage="distances", error=f"{type(error).__name__}: {error}"))
                algorithm = "ga"
            else:
                competition = competition_scores(values, distances, self.k_nearest_fitter)
                scores = {c.id: float(v) for c, v in zip(members, competition)}
                keep = dns_survivors(values, distances, self.k_nearest_fitter, size, protected)
        if algorithm == "ga" or len(members) <= 1:
            keep = ga_survivors(values, size, protected)
        before = [c.id for c in members]
        self.ids = [members[i].id for i in keep]
        self.scores = scores
        await emit(PopulationUpdated(algorithm=algorithm, before=before, population=list(self.ids),
                                     fitness={c.id: f for c, f in zip(members, values)}, competition=scores))
