"""``promptgym.optimizers``: what evolves a program's trainable variables: prompts (RandomFewShot, OMEGA, GEPA,
MIPRO, ...), weights (``FineTune``), and chains of them (``Sequence``).

``FineTune`` trains through the SFT engine of :mod:`promptgym.finetune`, which it imports when it is built:
importing this package loads neither that engine nor torch.
"""

from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.optimizers.kit import Budget
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.embedder_tuning import EmbedderTuning
from promptgym.optimizers.evolutionary import EvolutionaryOptimizer
from promptgym.optimizers.few_shot import GreedyOptimizer, RandomFewShot
from promptgym.optimizers.finetune import FineTune
from promptgym.optimizers.gepa import GEPA
from promptgym.optimizers.knn_few_shot import KNNFewShot
from promptgym.optimizers.mipro import MIPRO, MIPROv2
from promptgym.optimizers.omega import OMEGA
from promptgym.optimizers import random_few_shot  # noqa: F401  (synalinks spells `optimizers.random_few_shot.RandomFewShot`)
from promptgym.optimizers.sequence import Sequence

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
    "sequence": Sequence,
    "finetune": FineTune,
    "embeddertuning": EmbedderTuning,
}


def get(identifier: Any) -> Optimizer:
    """An optimizer from an instance, a name (``"randomfewshot"``) or a config dict."""
    return get_by_identifier(identifier, OPTIMIZERS, "optimizer", base=Optimizer)


__all__ = ["Budget", "EmbedderTuning", "EvolutionaryOptimizer", "FineTune", "GEPA", "MIPRO", "OPTIMIZERS", "Candidate", "GreedyOptimizer", "KNNFewShot", "MIPROv2", "OMEGA", "Optimizer", "RandomFewShot", "Sequence", "get", "deserialize", "serialize"]


def serialize(optimizer: Any) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` of a optimizer."""
    from promptgym.core.serialization import serialize_object

    return serialize_object(optimizer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Any:
    """Rebuild a optimizer from :func:`serialize`'s dict (registered classes, or ``custom_objects``)."""
    from promptgym.core.serialization import deserialize_in_scope

    return deserialize_in_scope(config, custom_objects, expected="optimizer")
