"""The untrained RAG program's answers on the first test questions, beside the gold answer: what the score hides.

    PYTHONPATH=. flock /tmp/promptgym-llm.lock .venv/bin/python bench/rag/traces.py --kb-dir /tmp/kb/rag2000 --n 10

``--kb-dir`` is a knowledge base that ``run.py --kb-dir`` built (the same profiles: ``--profiles``, ``--seed``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import promptgym as pg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
from saved import open_saved  # noqa: E402


async def main() -> None:
    saved = open_saved(__doc__.split("\n\n")[0], n=10)
    test, inputs, kb = saved.test, saved.inputs, saved.kb
    rag = run.build_programs(saved.lm, kb, saved.args.k)["rag"]
    retriever = rag.get_module("retriever")
    hits = recalled = 0
    for x, question in zip(inputs, test):
        try:
            found = await retriever(x)
            rows = found.get_json().get("result", []) if found is not None else []
            output = await rag.get_module("answerer")(found) if found is not None else None
            answer = (output.get_json() if output is not None else {}).get("answer")
        except pg.lm.errors.LMError as error:  # a failed call is an answer too: say which
            rows, answer = [], f"error: {error}"
        hit, gold_found = run.correct(answer, question.answer), any(row.get("id") == question.gold_id for row in rows)
        hits, recalled = hits + hit, recalled + gold_found
        print(f"{'ok ' if hit else 'no '} {'found' if gold_found else 'missed'} {question.text} | gold: {question.answer}"
              f" | answer: {answer} | search: {found.get_json().get('search') if found is not None else None}")
    print(f"accuracy {hits / len(test):.2f}, gold profile retrieved {recalled / len(test):.2f}")
    kb.close()


if __name__ == "__main__":
    asyncio.run(main())
