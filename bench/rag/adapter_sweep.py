"""How the query adapter's training settings generalize on the RAG bench's profiles (e5, the raw questions).

    PYTHONPATH=. .venv/bin/python bench/rag/adapter_sweep.py --kb-dir /tmp/ragkb --train 150 --use 150 13

Mines positives and hard negatives the way EmbedderTuning does (``EmbedderTuning.mine``: the best-ranked
chunk of a hybrid-search pool that holds the answer) for --train training questions and the 100 test
questions, then trains ``W`` with each setting on the first N training rows (each of --use) and reports
recall@3 of the gold profile by exact vector search over all profiles, for the identity and for ``W``.
No language model: the queries are the raw questions. This is what chose EmbedderTuning's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.optimizers.contrastive import ContrastiveRow, train_query_map
from promptgym.optimizers.embedder_tuning import EmbedderTuning

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as rag_bench  # noqa: E402
from corpus import profiles, questions  # noqa: E402

SETTINGS = [(0.01, 0.01, 200), (0.002, 0.01, 200), (0.0005, 0.01, 200), (0.0005, 0.1, 200), (0.0005, 0.3, 200)]
"""(learning_rate, l2, steps)."""


def recall_at_3(matrix: np.ndarray, ids: list[str], corpus: np.ndarray, mined: list[tuple[Any, str]]) -> float:
    hits = 0
    for example, gold in mined:
        query = example.queries[0] @ matrix.T
        top = np.argsort(-(corpus @ (query / np.linalg.norm(query))))[:3]
        hits += ids.index(gold) in top
    return hits / len(mined)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb-dir", required=True)
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--train", type=int, default=150)
    parser.add_argument("--use", type=int, nargs="+", default=[150, 13])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    people = profiles(args.profiles, seed=0)
    test = questions(people, 100, seed=1)
    train = questions(people, args.train, seed=2, skip={q.gold_id for q in test})
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
    identity = np.eye(corpus.shape[1], dtype=np.float32)
    report: dict[str, Any] = {
        "mined": {name: len(items) for name, items in mined.items()},
        "positive_is_gold": {name: sum(example.key.endswith(gold) for example, gold in items)
                             for name, items in mined.items()},
        "identity_test_recall_at_3": recall_at_3(identity, ids, corpus, mined["test"]), "runs": []}
    print(json.dumps({key: value for key, value in report.items() if key != "runs"}), flush=True)
    for count in args.use:
        use = mined["train"][:count]
        training = [ContrastiveRow(query=example.queries[0], positive=example.positive, negatives=example.negatives,
                                   key=example.key) for example, _ in use]
        for learning_rate, l2, steps in SETTINGS:
            result = train_query_map(training, steps=steps, learning_rate=learning_rate, l2=l2)
            row = {"train_rows": count, "learning_rate": learning_rate, "l2": l2, "steps": steps,
                   "loss": [round(result.losses[0], 3), round(min(result.losses), 3)],
                   "train_recall_at_3": round(recall_at_3(result.matrix, ids, corpus, use), 3),
                   "test_recall_at_3": recall_at_3(result.matrix, ids, corpus, mined["test"])}
            report["runs"].append(row)
            print(json.dumps(row), flush=True)
    kb.close()
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
