"""Knowledge-base speed at a given size: writes, the BM25 rebuild, and search latency, on one DuckDB file.

    .venv/bin/python bench/knowledge/speed.py --rows 10000 100000 --dim 384 --json bench/results/knowledge_speed.json

No model runs: records carry random unit vectors (the dimension of
multilingual-e5-small) and texts drawn from a small vocabulary, so what is
timed is the knowledge base, not an embedder. For each size it reports the
write rate (``update`` in batches), the first full-text search (which
rebuilds the BM25 index once), p50/p99 of full-text, vector and hybrid
searches, and recall@10 of the vector search against exact numpy search
(1.0 expected: the search is exact). Beside it, the same queries on the same
vectors held in memory: exact numpy search (the ceiling for recall) and
faiss-cpu (``pip install faiss-cpu==1.15.1``, the ``bench`` extra): its exact
``IndexFlatIP`` and an HNSW index (M=32, efSearch=64), the speed anchors, with
their build time and HNSW's recall@10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from promptgym import DataModel  # noqa: E402
from promptgym.core.json_data_model import JsonDataModel  # noqa: E402
from promptgym.knowledge_bases import KnowledgeBase  # noqa: E402

WORDS = ("fox dog cat owl river forest city paper engine battery solar wind market price tax law court "
         "school doctor patient virus cell gene protein planet star orbit rocket music film novel poem").split()


class Passage(DataModel):
    id: str
    text: str


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def latency(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50) * 1000, 2), "p99": round(percentile(values, 99) * 1000, 2)}


def anchors(vectors: np.ndarray, queries: np.ndarray, k: int = 10) -> dict:
    """Exact numpy search, and faiss's exact and HNSW indexes when faiss-cpu is installed: per-query latency,
    build seconds, and recall@k against the exact top k."""
    timings, exact = [], []
    for query in queries:
        started = time.perf_counter()
        scores = vectors @ query
        top = np.argpartition(-scores, k)[:k]
        exact.append(set(top[np.argsort(-scores[top])].tolist()))
        timings.append(time.perf_counter() - started)
    found: dict = {"numpy_exact": {"latency_ms": latency(timings)}}
    try:
        import faiss  # deferred: an optional benchmark dependency
    except ImportError:
        found["faiss"] = "not installed (pip install faiss-cpu==1.15.1)"
        return found
    for name, build in (("faiss_flat", lambda: faiss.IndexFlatIP(vectors.shape[1])),
                        ("faiss_hnsw", lambda: faiss.IndexHNSWFlat(vectors.shape[1], 32, faiss.METRIC_INNER_PRODUCT))):
        started = time.perf_counter()
        index = build()
        if name == "faiss_hnsw":
            index.hnsw.efSearch = 64
        index.add(vectors)
        built = time.perf_counter() - started
        timings, recalls = [], []
        for query, truth in zip(queries, exact):
            started = time.perf_counter()
            _, ids = index.search(query[None, :], k)
            timings.append(time.perf_counter() - started)
            recalls.append(len(truth & set(ids[0].tolist())) / k)
        found[name] = {"latency_ms": latency(timings), "build_s": round(built, 2),
                       "recall_at_10_vs_exact": round(statistics.mean(recalls), 3)}
    found["faiss_version"] = faiss.__version__
    return found


async def measure(rows: int, dim: int, batch: int, queries: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((rows, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [" ".join(rng.choice(WORDS, size=12)) for _ in range(rows)]
    schema = Passage.get_schema()
    with tempfile.TemporaryDirectory() as folder:
        kb = KnowledgeBase(uri=str(Path(folder) / "speed.db"), data_models=[Passage])
        write_s = 0.0
        for start in range(0, rows, batch):
            records = [JsonDataModel(json={"id": f"p{i}", "text": texts[i], "embedding": vectors[i].tolist()},
                                     schema=schema) for i in range(start, min(rows, start + batch))]
            started = time.perf_counter()  # the knowledge base's time only, not building the records
            await kb.update(records)
            write_s += time.perf_counter() - started
        started = time.perf_counter()
        await kb.fulltext_search("fox river", table_name="Passage", k=10)
        rebuild_s = time.perf_counter() - started
        query_vectors = rng.standard_normal((queries, dim)).astype(np.float32)
        query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
        timings: dict[str, list[float]] = {"fulltext": [], "similarity": [], "hybrid_fts": []}
        recalls = []
        for index, vector in enumerate(query_vectors):
            words = " ".join(rng.choice(WORDS, size=3))
            started = time.perf_counter()
            await kb.fulltext_search(words, table_name="Passage", k=10)
            timings["fulltext"].append(time.perf_counter() - started)
            started = time.perf_counter()
            found = await kb.similarity_search(table_name="Passage", vector_or_vectors=vector.tolist(), k=10)
            timings["similarity"].append(time.perf_counter() - started)
            started = time.perf_counter()
            await kb.hybrid_fts_search(table_name="Passage", keywords=words, vector_or_vectors=vector.tolist(), k=10)
            timings["hybrid_fts"].append(time.perf_counter() - started)
            exact = {f"p{i}" for i in np.argsort(-(vectors @ vector))[:10]}
            recalls.append(len(exact & {row["id"] for row in found}) / 10)
        size_mb = (Path(folder) / "speed.db").stat().st_size / 1e6
        kb.close()
    return {"rows": rows, "dim": dim, "batch": batch, "queries": queries,
            "write_rows_per_s": round(rows / write_s), "write_s": round(write_s, 2),
            "first_fulltext_search_s (BM25 rebuild)": round(rebuild_s, 2), "file_mb": round(size_mb, 1),
            "latency_ms": {name: latency(values) for name, values in timings.items()},
            "recall_at_10_vs_exact_numpy": round(statistics.mean(recalls), 3),
            "anchors (the same vectors in memory)": anchors(vectors, query_vectors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = [asyncio.run(measure(rows, args.dim, args.batch, args.queries, args.seed)) for rows in args.rows]
    for result in results:
        print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(["bench/knowledge/speed.py", *sys.argv[1:]]),
                                         "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
