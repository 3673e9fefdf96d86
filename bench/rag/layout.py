"""Where the question goes in the answerer's input: the RAG program's answer on the first test questions, with the
knowledge base searched by the raw question or by the retriever's LM-written queries (``return_query=False``: the
rows, then the question), beside whether the gold profile was found.

    PYTHONPATH=. flock /tmp/promptgym-llm.lock .venv/bin/python bench/rag/layout.py --kb-dir /tmp/kb/rag2000 --n 40

``--kb-dir`` is a knowledge base that ``run.py --kb-dir`` built (the same profiles: ``--profiles``, ``--seed``).
``traces.py`` shows the full program's answers one by one (with the queries it shows the answerer by default).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import promptgym as pg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
from saved import open_saved  # noqa: E402


class RowsThenQuestion(pg.DataModel):
    result: list[dict[str, Any]] = pg.Field(description="The result")
    question: str = pg.Field(description="A question about one person")


async def main() -> None:
    saved = open_saved(__doc__.split("\n\n")[0], n=40)
    args, test, inputs, lm, kb = saved.args, saved.test, saved.inputs, saved.lm, saved.kb
    retriever = run.build_programs(lm, kb, args.k)["rag"].get_module("retriever")
    answerer = pg.Generator(data_model=run.Answer, language_model=lm)
    for searched_by in ("raw question", "LM queries"):
        hits = found_gold = 0
        started = time.perf_counter()
        for x, question in zip(inputs, test):
            if searched_by == "raw question":
                rows = await kb.hybrid_fts_search(question.text, table_name="Person", k=args.k)
                found: Any = RowsThenQuestion(result=rows, question=question.text)
            else:
                found = await retriever(x)
                rows = found.get_json()["result"] if found is not None else []
            output = await answerer(found) if found is not None else None
            hits += run.correct((output.get_json() if output is not None else {}).get("answer"), question.answer)
            found_gold += any(row["id"] == question.gold_id for row in rows)
        print(f"{searched_by}: accuracy {hits}/{args.n}, gold profile retrieved {found_gold}/{args.n}, "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    kb.close()


if __name__ == "__main__":
    asyncio.run(main())
