"""The input-search RAG program with the query embedder that run.py's tuned arm kept, at fewer rows (k), untrained
otherwise: does showing the reader fewer near-duplicates pay for the recall it loses? (docs/benchmarks.md, RAG
section 7)

    PYTHONPATH=. flock /tmp/promptgym-llm.lock .venv/bin/python bench/rag/rows_k.py 1 2

Reads the knowledge base that ``run.py --kb-dir /tmp/kb/rag2000`` built and the tuned embedder
``local/ft-e5-a19b1d58029c`` that its ``--search input`` run saved; writes ``/tmp/rowsk/rows_k.json``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import promptgym as pg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as bench  # noqa: E402

TUNED = "local/ft-e5-a19b1d58029c"
OUT = Path("/tmp/rowsk/rows_k.json")


async def main() -> None:
    people = bench.profiles(2000, seed=0)
    by_id = {p.id: p for p in people}
    test = bench.questions(people, 100, seed=1)
    lm = pg.LanguageModel(model=f"local/{bench.MODEL_NAME}", cache=False, max_tokens=96)
    embedder = pg.EmbeddingModel(bench.EMBEDDER)
    kb = await bench.build_knowledge_base(Path("/tmp/kb/rag2000"), people, embedder)
    x, y = bench.as_data(test, by_id)
    reward = pg.rewards.RewardFunctionWrapper(fn=bench.answer_reward)
    out = {}
    for k in (int(a) for a in sys.argv[1:]):
        rag = bench.build_programs(lm, kb, k, "input")["rag"]
        retriever = rag.get_module("retriever")
        retriever.query_embedder.assign({"model": TUNED})
        out[f"recall_k{k}"] = await bench.adapter_recall(retriever, test, k)
        rag.compile(reward=reward)
        out[f"k{k}"] = await bench.score(rag, lm, x, y)
        recall = {kind: (v["identity"]["recall"], v["tuned"]["recall"])
                  for kind, v in out[f"recall_k{k}"].items() if isinstance(v, dict)}
        print(k, out[f"k{k}"]["accuracy"], recall, flush=True)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(out, indent=1))
    kb.close()


if __name__ == "__main__":
    asyncio.run(main())
