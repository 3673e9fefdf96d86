"""The search queries the embedded model writes for the RAG bench's questions, saved for a scripted replay.

``run.py --scripted --e5 --queries FILE`` then replays them (the scripted reader writes these queries instead
of the question), so ``FineTune(target="embedder")`` can be studied on the queries the real program writes,
in a minute a try instead of an hour of model calls.

    PYTHONPATH=. flock /tmp/promptgym-llm.lock .venv/bin/python bench/rag/lm_queries.py --profiles 2000 \\
        --test 100 --train 150 --kb-dir /tmp/kb/rag2000 --out /tmp/rag39/lm_queries.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import promptgym as pg
from run import EMBEDDER, MODEL_NAME, Query, build_knowledge_base, build_programs  # also puts bench/ on sys.path

from corpus import profiles, questions


async def main(argv: list[str] | None = None) -> dict[str, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--train", type=int, default=150)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kb-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    people = profiles(args.profiles, seed=args.seed)
    test = questions(people, args.test, seed=args.seed + 1)
    train = questions(people, args.train, seed=args.seed + 2, skip={q.gold_id for q in test})
    lm = pg.LanguageModel(model=f"local/{MODEL_NAME}", cache=False, max_tokens=96)
    kb = await build_knowledge_base(Path(args.kb_dir), people, pg.EmbeddingModel(EMBEDDER))
    retriever = build_programs(lm, kb, args.k)["rag"].get_module("retriever")
    written: dict[str, list[str]] = {}
    started = time.perf_counter()
    for number, question in enumerate([*train, *test]):
        try:
            output = await retriever.search_query_generator(Query(question=question.text))
            written[question.text] = [str(term) for term in (output.get("search") or [])]
        except Exception as error:  # one failed call: no queries for that question, as the program would have
            print(f"{question.text!r}: {type(error).__name__}: {error}", flush=True)
            written[question.text] = []
        if number % 25 == 0:
            print(f"{number + 1} of {len(train) + len(test)} in {time.perf_counter() - started:.0f} s", flush=True)
    kb.close()
    Path(args.out).write_text(json.dumps(written, indent=1))
    return written


if __name__ == "__main__":
    asyncio.run(main())
