"""Does a query map with fewer parameters generalize to new names? Full, low-rank and diagonal maps on the RAG bench.

    PYTHONPATH=. nice -n 19 .venv/bin/python bench/rag/adapter_shapes.py --kb-dir /tmp/kb/rag2000 \\
        --out bench/results/rag_issue39_adapter_shapes.json

The full 384 x 384 map memorizes the training questions' names (training-fold recall@3 0.95, held-out
lower: docs/benchmarks.md). This trains, on the first 60 and 150 mined training questions (raw questions,
positives and hard negatives mined as EmbedderTuning mines them, as in ``adapter_sweep.py``), three shapes
of ``W`` by the same InfoNCE loss: ``full`` (EmbedderTuning's, its defaults), ``lowrank`` (``I + A Bᵀ``,
rank 4 or 16) and ``diag`` (one weight per dimension), and reports recall@3 of the mined positive on the
100 test questions by exact vector search over all profiles and through the retriever's hybrid search.
No language model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.modules.knowledge.query_adapter import adapter_value
from promptgym.optimizers.contrastive import ContrastiveRow, contrastive_batch, loss_and_gradient, train_query_map
from promptgym.optimizers.embedder_tuning import EmbedderTuning

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as rag_bench  # noqa: E402
from corpus import profiles, questions  # noqa: E402

SHAPES = [("full", None, 0.0005, 0.1)] + [("diag", None, lr, l2) for lr in (0.002, 0.01) for l2 in (0.1, 1.0)] + \
         [("lowrank", rank, lr, 0.1) for rank in (4, 16) for lr in (0.001, 0.005)]
"""(shape, rank, learning_rate, l2)."""


def train_shaped(rows: list[ContrastiveRow], shape: str, rank: int, *, learning_rate: float, l2: float,
                 steps: int = 200, temperature: float = 0.05, seed: int = 0) -> np.ndarray:
    """``W`` of the given shape trained by full-batch Adam on the InfoNCE loss (the lowest-loss step's)."""
    queries, candidates, mask = contrastive_batch(rows)
    dimension = queries.shape[1]
    identity = np.eye(dimension)
    build: Callable[[list[np.ndarray]], np.ndarray]
    if shape == "diag":
        params = [np.ones(dimension)]
        build = lambda p: np.diag(p[0])  # noqa: E731
        grads = lambda p, g: [np.diag(g) + 2 * l2 * (p[0] - 1)]  # noqa: E731
    else:  # I + A Bᵀ: A starts at zero (W starts at the identity), B random so that A gets a gradient
        params = [np.zeros((dimension, rank)), np.random.default_rng(seed).normal(scale=0.1, size=(dimension, rank))]
        build = lambda p: identity + p[0] @ p[1].T  # noqa: E731

        def grads(p: list[np.ndarray], g: np.ndarray) -> list[np.ndarray]:
            g = g + 2 * l2 * (p[0] @ p[1].T)
            return [g @ p[1], g.T @ p[0]]
    first, second = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    best, best_loss = build(params), loss_and_gradient(build(params), queries, candidates, mask, temperature)[0]
    for step in range(1, steps + 1):
        _, gradient = loss_and_gradient(build(params), queries, candidates, mask, temperature)
        for i, g in enumerate(grads(params, gradient)):
            first[i] = 0.9 * first[i] + 0.1 * g
            second[i] = 0.999 * second[i] + 0.001 * g * g
            params[i] = params[i] - learning_rate * (first[i] / (1 - 0.9 ** step)) / (
                np.sqrt(second[i] / (1 - 0.999 ** step)) + 1e-8)
        loss = loss_and_gradient(build(params), queries, candidates, mask, temperature)[0]
        if loss < best_loss:
            best, best_loss = build(params), loss
    return best.astype(np.float32)


def vector_recall(matrix: np.ndarray, ids: list[str], corpus: np.ndarray, mined: list[tuple[Any, str]]) -> float:
    hits = []
    for example, gold in mined:
        query = example.queries[0] @ matrix.T
        hits.append(ids.index(gold) in np.argsort(-(corpus @ (query / np.linalg.norm(query))))[:3])
    return float(np.mean(hits))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb-dir", required=True)
    parser.add_argument("--use", type=int, nargs="+", default=[60, 150])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    people = profiles(2000, seed=0)
    test = questions(people, 100, seed=1)
    train = questions(people, max(args.use), seed=2, skip={q.gold_id for q in test})
    kb = await rag_bench.build_knowledge_base(Path(args.kb_dir), people, pg.EmbeddingModel(rag_bench.EMBEDDER))
    retriever = rag_bench.build_programs(rag_bench.scripted_reader(), kb, 3)["rag"].get_module("retriever")
    miner = EmbedderTuning()
    mined: dict[str, list[tuple[Any, str]]] = {}
    for name, asked in (("train", train), ("test", test)):
        found = [(await miner.mine(retriever, i, [q.text], [q.answer]), q.gold_id) for i, q in enumerate(asked)]
        mined[name] = [(example, gold) for example, gold in found if example is not None]
    rows = await kb.sql("SELECT id, embedding FROM Person ORDER BY id")
    ids = [row["id"] for row in rows]
    corpus = np.array([row["embedding"] for row in rows], dtype=np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    tests = [example for example, _ in mined["test"]]

    async def hybrid_recall(matrix: np.ndarray) -> float:
        ranks = await miner.ranks(retriever, tests, adapter_value(matrix), 3)
        return float(np.mean([rank < 3 for rank in ranks]))

    identity = np.eye(corpus.shape[1], dtype=np.float32)
    report: dict[str, Any] = {"mined": {name: len(items) for name, items in mined.items()},
                              "identity": {"vector": vector_recall(identity, ids, corpus, mined["test"]),
                                           "hybrid": await hybrid_recall(identity)}, "runs": []}
    print(json.dumps({key: value for key, value in report.items() if key != "runs"}), flush=True)
    for count in args.use:
        use = mined["train"][:count]
        training = [ContrastiveRow(query=example.queries[0], positive=example.positive, negatives=example.negatives,
                                   key=example.key) for example, _ in use]
        for shape, rank, learning_rate, l2 in SHAPES:
            matrix = (train_query_map(training, learning_rate=learning_rate, l2=l2).matrix if shape == "full" else
                      train_shaped(training, shape, rank or 0, learning_rate=learning_rate, l2=l2))
            row = {"train": count, "shape": shape, "rank": rank, "learning_rate": learning_rate, "l2": l2,
                   "train_vector": round(vector_recall(matrix, ids, corpus, use), 3),
                   "test_vector": vector_recall(matrix, ids, corpus, mined["test"]),
                   "test_hybrid": await hybrid_recall(matrix)}
            report["runs"].append(row)
            print(json.dumps(row), flush=True)
    kb.close()
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
