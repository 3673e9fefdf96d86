"""``promptgym.optimizers``: what evolves a program's trainable variables.

``FineTune`` (weights) lives in the finetune layer, above this one: the
``finetune`` name and the ``FineTune`` attribute resolve it on first use.
"""

import importlib
from typing import Any

from promptgym.core.identifiers import get_by_identifier
from promptgym.optimizers.kit import Budget
from promptgym.optimizers.base import Candidate, Optimizer
from promptgym.optimizers.evolutionary import EvolutionaryOptimizer
from promptgym.optimizers.few_shot import GreedyOptimizer, RandomFewShot
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
}

LAZY_OPTIMIZERS = {"FineTune": "promptgym.finetune.optimizer"}
"""Optimizers of a layer above this one, by class name: the module that defines (and registers) each."""


def __getattr__(name: str) -> Any:
    if name in LAZY_OPTIMIZERS:
        return getattr(importlib.import_module(LAZY_OPTIMIZERS[name]), name)
    raise AttributeError(f"module 'promptgym.optimizers' has no attribute {name!r}")


def load_lazy_optimizers() -> None:
    """Import the optimizers defined above this layer, so that their names resolve (``"finetune"``)."""
    for module in set(LAZY_OPTIMIZERS.values()):
        importlib.import_module(module)


def get(identifier: Any) -> Optimizer:
    """An optimizer from an instance, a name (``"randomfewshot"``) or a config dict."""
    load_lazy_optimizers()
    return get_by_identifier(identifier, OPTIMIZERS, "optimizer", base=Optimizer)


__all__ = ["Budget", "EvolutionaryOptimizer", "FineTune", "GEPA", "MIPRO", "OPTIMIZERS", "Candidate", "GreedyOptimizer", "KNNFewShot", "MIPROv2", "OMEGA", "Optimizer", "RandomFewShot", "Sequence", "get", "deserialize", "serialize"]


def serialize(optimizer: Any) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` of a optimizer."""
    from promptgym.core.serialization import serialize_object

    return serialize_object(optimizer)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Any:
    """Rebuild a optimizer from :func:`serialize`'s dict (registered classes, or ``custom_objects``)."""
    from promptgym.core.serialization import custom_object_scope, deserialize_object

    load_lazy_optimizers()
    with custom_object_scope(custom_objects or {}):
        return deserialize_object(config, expected="optimizer")
