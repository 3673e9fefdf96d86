"""What the knowledge-base fault cases run: an embedder that fails on cue, a corpus, the CLI with it registered.

    PGFAULT_KB_KILL_AT=3 python -c "import kb_support; kb_support.cli()" kb build kb.db docs --embedding-model ...

The fault is chosen by environment variable, not by the embedder's config: ``kb build`` stores that config
in the file, and the rerun that must resume would otherwise fail the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from promptgym.cli.main import main
from promptgym.core.serialization import register_builtin
from promptgym.lm.errors import LMConnectionError
from promptgym.testing import HashEmbeddingModel

DIMENSIONS = 32


@register_builtin
class FaultyEmbedder(HashEmbeddingModel):
    """HashEmbeddingModel that, on its Nth call, SIGKILLs (``PGFAULT_KB_KILL_AT``), sends itself SIGINT
    (``PGFAULT_KB_SIGINT_AT``), raises a connection error (``PGFAULT_KB_FAIL_AT``) or returns one vector
    too few (``PGFAULT_KB_SHORT_AT``). Every call appends a line to ``PGFAULT_KB_CALLS`` when set."""

    async def _embed(self, texts: list[str]) -> Any:
        call = self.calls + 1
        if os.environ.get("PGFAULT_KB_CALLS"):
            with open(os.environ["PGFAULT_KB_CALLS"], "a", encoding="utf-8") as log:
                log.write(f"{len(texts)}\n")
        if str(call) == os.environ.get("PGFAULT_KB_KILL_AT"):
            os.kill(os.getpid(), signal.SIGKILL)
        if str(call) == os.environ.get("PGFAULT_KB_SIGINT_AT"):
            os.kill(os.getpid(), signal.SIGINT)
        if str(call) == os.environ.get("PGFAULT_KB_FAIL_AT"):
            self.calls += 1
            raise LMConnectionError("embedding server went away (fault injected)")
        vectors = await super()._embed(texts)
        if str(call) == os.environ.get("PGFAULT_KB_SHORT_AT"):
            return np.asarray(vectors)[:-1]
        return vectors


def embedder_json(dimensions: int = DIMENSIONS) -> str:
    return json.dumps({"class_name": "FaultyEmbedder", "config": {"model": "local/multilingual-e5-small",
                                                                  "dimensions": dimensions}})


def write_corpus(folder: Path, count: int = 24, prefix: str = "doc") -> Path:
    """``count`` short text files of two chunks each (at chunk size 200)."""
    docs = folder / "docs"
    docs.mkdir(exist_ok=True)
    for index in range(count):
        words = " ".join(f"word{(index * 7 + step) % 97}" for step in range(50))
        (docs / f"{prefix}{index:03}.txt").write_text(f"Document {prefix} {index}. {words}\n\n{words[::-1]}",
                                                      encoding="utf-8")
    return docs


def cli() -> None:
    """``promptgym`` with FaultyEmbedder registered (the stored embedding-model JSON names it)."""
    sys.argv = ["promptgym", *sys.argv[1:]]
    main()


def kb_command(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """One ``promptgym kb ...`` in a child process (its output echoed, so a traceback in it is seen)."""
    ran = subprocess.run([sys.executable, "-c", "import kb_support; kb_support.cli()", "kb", *args],
                         capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    print(ran.stdout + ran.stderr, flush=True)
    return ran


def chunk_counts(database: Path) -> dict[str, int]:
    """Rows, distinct ids and distinct (source, position) places in the Chunk table."""
    con = duckdb.connect(str(database), read_only=True)
    try:
        rows, ids, places = con.execute("SELECT count(*), count(DISTINCT id), count(DISTINCT source || '#' || "
                                        "position) FROM Chunk").fetchone()
    finally:
        con.close()
    return {"rows": rows, "ids": ids, "places": places}
