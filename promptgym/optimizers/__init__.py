"""``promptgym.optimizers``: what evolves a program's trainable variables."""

from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.evolutionary import EvolutionaryOptimizer
from promptgym.optimizers.few_shot import GreedyOptimizer, RandomFewShot
from promptgym.optimizers.gepa import GEPA
from promptgym.optimizers.knn_few_shot import KNNFewShot
from promptgym.optimizers.mipro import MIPRO, MIPROv2
from promptgym.optimizers.omega import OMEGA

OPTIMIZERS: dict[str, Any] = {
    "randomfewshot": RandomFewShot,
    "greedyoptimizer": GreedyOptimizer,
    "greedy": GreedyOptimizer,
    "knnfewshot": KNNFewShot,
    "knn": KNNFewShot,
    "omega": OMEGA,
    "gepa": GEPA,
    "mipro": MIPRO,
    "miprov2": MIPRO,
}


def get(identifier: Any) -> Optimizer:
    """An optimizer from an instance, a name (``"randomfewshot"``) or a config dict."""
    return get_by_identifier(identifier, OPTIMIZERS, "optimizer", base=Optimizer)


__all__ = ["EvolutionaryOptimizer", "GEPA", "MIPRO", "OPTIMIZERS", "Candidate", "GreedyOptimizer", "KNNFewShot", "MIPROv2", "OMEGA", "Optimizer", "RandomFewShot", "get"]
