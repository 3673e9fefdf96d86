"""What ``traces.py`` and ``layout.py`` share: the command line naming a knowledge base that ``run.py --kb-dir``
built, and that run's first test questions, its model and its knowledge base opened again."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.knowledge_bases import KnowledgeBase

import run


@dataclass
class Saved:
    args: argparse.Namespace
    test: list[run.Question]
    inputs: np.ndarray
    lm: Any
    kb: KnowledgeBase


def open_saved(description: str, n: int) -> Saved:
    """Parse ``--kb-dir --profiles --seed --n`` (``n`` the default count of questions) and open what they name."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--kb-dir", required=True)
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=n)
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()
    people = run.profiles(args.profiles, seed=args.seed)
    test = run.questions(people, 100, seed=args.seed + 1)[: args.n]
    lm = pg.LanguageModel(model=f"local/{run.MODEL_NAME}", cache=False, max_tokens=96)
    kb = KnowledgeBase(uri=str(Path(args.kb_dir) / "rag.db"), data_models=[run.Person],
                       embedding_model=pg.EmbeddingModel(run.EMBEDDER))
    inputs, _ = run.as_data(test, {person.id: person for person in people})
    return Saved(args, test, inputs, lm, kb)
