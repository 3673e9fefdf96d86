"""Knowledge bases as a hostile world meets them (issue 39): kills mid-ingestion, bad files, changed schemas.

- a SIGKILL or Ctrl-C during ``kb build`` / ``kb add``, then the same command again: it resumes, with every
  chunk stored once (``ok`` only if rows == distinct ids == distinct (source, position) == the chunks);
- the embedder failing mid-batch (a connection error, one vector too few): a clear error, then a rerun
  resumes with no duplicates;
- a corrupt, truncated or locked database file, through ``kb search | add | info`` and a train config's
  ``[knowledge]``: a clear error naming the file;
- reopening with a changed DataModel or another embedding dimension/model: a clear error naming both.

Only the scripted FaultyEmbedder (kb_support.py): nothing is downloaded.
"""

from __future__ import annotations

import textwrap

from common import Case, Ran, cli, snippet
from configs import GENERATOR_PROGRAM, config, files

HEAD = """
import asyncio, json, os, signal, subprocess, sys, time
from pathlib import Path
from kb_support import chunk_counts, embedder_json, kb_command, write_corpus
from surface_support import emit, report
HERE = Path.cwd()
"""

BUILD = '"build", "kb.db", str(docs), "--embedding-model", embedder_json(), "--chunk-size", "200", ' \
        '"--overlap", "20", "--batch-size", "4"'


SUMMARY = r"""
import re
def summary(output):
    found = re.search(r"(\d+) files, (\d+) chunks: (\d+) added, (\d+) already stored", output)
    return {"chunks": int(found[2]), "added": int(found[3]), "already": int(found[4])} if found else {}
"""


def code(body: str) -> list[str]:
    return snippet(HEAD + SUMMARY + textwrap.dedent(body))


def resumed(ran: Ran) -> str | None:
    """The rerun stored every chunk once, and found some already stored (it resumed, not restarted)."""
    result = ran.result()
    counts, total = result.get("counts") or {}, result.get("chunks")
    if not counts or total is None:
        return f"no counts: {result}"
    if not counts["rows"] == counts["ids"] == counts["places"] == total:
        return f"duplicate or missing chunks: {counts}, expected {total}"
    if not result.get("already"):
        return f"the rerun stored everything again (already stored: {result.get('already')})"
    return None




def interrupted_then_rerun(name: str, fault: str, first: str, again: str, killed_code: str, corpus: str = "",
                           mention: tuple[str, ...] = ()) -> Case:
    """Run ``first`` with ``fault`` set, then ``again`` without: the rerun must resume."""
    body = f"""
    docs = write_corpus(HERE)
    {corpus}
    broken = kb_command({first}, env={{{fault}}})
    if broken.returncode != {killed_code}:
        emit({{"raised": None, "failed": False, "message": f"first run exited {{broken.returncode}}"}})
        sys.exit(0)
    if "Traceback" in broken.stdout + broken.stderr:
        sys.exit(0)  # the echoed output carries it: the judge counts a traceback
    rerun = kb_command({again})
    counts = chunk_counts(HERE / "kb.db") if rerun.returncode == 0 else {{}}
    emit({{"raised": None, "counts": counts, **summary(rerun.stdout), "first_exit": broken.returncode}})
    """
    return Case("kb", name, code(body), expect="ok", check=resumed, mention=mention, timeout=240)


def kill_cases() -> list[Case]:
    add_corpus = ('kb_command(' + BUILD + ')\n    more = write_corpus(HERE, prefix="more")')
    return [
        interrupted_then_rerun("kill -9 mid `kb build`, rerun build", '"PGFAULT_KB_KILL_AT": "4"', BUILD, BUILD, "-9"),
        interrupted_then_rerun("kill -9 mid `kb add`, rerun add", '"PGFAULT_KB_KILL_AT": "3"',
                               '"add", "kb.db", str(docs)', '"add", "kb.db", str(docs)', "-9", corpus=add_corpus),
        interrupted_then_rerun("Ctrl-C mid `kb build`, rerun build", '"PGFAULT_KB_SIGINT_AT": "4"', BUILD, BUILD,
                               "130"),
        interrupted_then_rerun("embedder fails mid-batch in `kb build`, rerun build", '"PGFAULT_KB_FAIL_AT": "4"',
                               BUILD, BUILD, "2"),
    ]


def embedder_cases() -> list[Case]:
    body = """
    docs = write_corpus(HERE)
    ran = kb_command({build}, env={{"{variable}": "3"}})
    emit({{"raised": "exit %d" % ran.returncode if ran.returncode else None, "message": ran.stdout[-400:]}})
    """
    return [
        Case("kb", "embedder raises mid-batch: the error", code(body.format(build=BUILD, variable="PGFAULT_KB_FAIL_AT")),
             mention=("embedding", "rerun")),
        Case("kb", "embedder returns one vector too few", code(body.format(build=BUILD, variable="PGFAULT_KB_SHORT_AT")),
             mention=("vectors for",)),
    ]


def bad_file_cases() -> list[Case]:
    garbage = {"kb.db": b"this is not a database\x00\xff" * 100, "docs/a.txt": "Some text."}
    found = [
        Case("kb", f"corrupt file: kb {command}", cli("kb", command, "kb.db", *extra), files=garbage,
             mention=("kb.db",))
        for command, extra in (("search", ("query",)), ("add", ("docs",)), ("info", ()))
    ]
    truncate = """
    docs = write_corpus(HERE, count=4)
    kb_command({build})
    data = (HERE / "kb.db").read_bytes()
    (HERE / "kb.db").write_bytes(data[: len(data) // 3])
    ran = kb_command("search", "kb.db", "word1")
    emit({{"raised": "exit %d" % ran.returncode if ran.returncode else None, "message": ran.stdout[-400:]}})
    """
    found.append(Case("kb", "truncated file: kb search", code(truncate.format(build=BUILD)), mention=("kb.db",)))
    locked = """
    docs = write_corpus(HERE, count=4)
    kb_command({build})
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, time; con = duckdb.connect('kb.db'); "
                               "print('holding', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    try:
        ran = kb_command({command})
    finally:
        holder.kill()
        holder.wait()
    emit({{"raised": "exit %d" % ran.returncode if ran.returncode else None, "message": ran.stdout[-400:]}})
    """
    for label, command in (("kb add", '"add", "kb.db", str(docs)'), ("kb search", '"search", "kb.db", "word1"')):
        found.append(Case("kb", f"file locked by a writer: {label}", code(locked.format(build=BUILD, command=command)),
                          mention=("kb.db", "locked")))
    knowledge = '[knowledge]\npath = "kb.db"\n'
    found.append(Case("kb", "corrupt file: train [knowledge]", cli("train", "-c", "run.toml", "--dry-run"),
                      files={**files(config(program=GENERATOR_PROGRAM, extra=knowledge)), **garbage},
                      mention=("knowledge.path", "kb.db")))
    return found


def changed_schema_cases() -> list[Case]:
    data_model = """
    import promptgym as pg
    from promptgym.knowledge_bases import KnowledgeBase
    class Note(pg.DataModel):
        id: str
        text: str
    async def main():
        kb = KnowledgeBase(uri="kb.db", data_models=[Note])
        await kb.update(Note(id="1", text="hello"))
        kb.close()
        class Note2(pg.DataModel):
            id: str
            body: str
            stars: int
        schema = Note2.get_schema()
        changed = pg.SymbolicDataModel(schema={**schema, "title": "Note"})
        KnowledgeBase(uri="kb.db", data_models=[changed])
        return {"reopened": True}
    report(main)
    """
    dimension = """
    from promptgym.knowledge_bases import KnowledgeBase
    from kb_support import FaultyEmbedder
    async def main():
        docs = write_corpus(HERE, count=2)
        kb_command({build})
        kb = KnowledgeBase(uri="kb.db", embedding_model=FaultyEmbedder(dimensions={dimensions}, model="{model}"))
        rows = await kb.similarity_search("word1", table_name="Chunk", k=2)
        return {{"rows": len(rows)}}
    report(main)
    """
    other_model = '[knowledge]\npath = "kb.db"\nembedding_model = "none"\n'
    prepare_config = f"""
    docs = write_corpus(HERE, count=2)
    kb_command({BUILD})
    ran = subprocess.run([sys.executable, "-c", "import kb_support; kb_support.cli()", "train", "-c", "run.toml",
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    print(ran.stdout + ran.stderr)
    emit({{"raised": "exit %d" % ran.returncode if ran.returncode else None, "message": ran.stdout[-400:]}})
    """
    return [
        Case("kb", "reopened with a changed DataModel", code(data_model), mention=("text: VARCHAR", "body: VARCHAR")),
        Case("kb", "reopened with another embedding dimension",
             code(dimension.format(build=BUILD, dimensions=64, model="local/multilingual-e5-small")),
             mention=("32-dimensional", "64-dimensional")),
        Case("kb", "reopened with another embedding model of the same dimension",
             code(dimension.format(build=BUILD, dimensions=32, model="openai/other-embedder")),
             mention=("openai/other-embedder", "not comparable")),
        Case("kb", "kb build again with another dimension", code(f"""
    docs = write_corpus(HERE, count=2)
    kb_command({BUILD})
    ran = kb_command({BUILD.replace('embedder_json()', 'embedder_json(64)')})
    emit({{"raised": "exit %d" % ran.returncode if ran.returncode else None, "message": ran.stdout[-400:]}})
    """), mention=("embedding_model", "--fresh")),
        Case("kb", "train [knowledge] names another embedder than the file's", code(prepare_config),
             files=files(config(program=GENERATOR_PROGRAM, extra=other_model)),
             mention=("knowledge.embedding_model", "kb.db")),
        Case("kb", "search an empty knowledge base", code("""
    from promptgym.knowledge_bases import KnowledgeBase
    async def main():
        kb = KnowledgeBase(uri="kb.db")
        return {"rows": await kb.fulltext_search("anything", table_name="Chunk")}
    report(main)
    """), mention=("no table 'Chunk'",)),
    ]


def cases() -> list[Case]:
    return [*kill_cases(), *embedder_cases(), *bad_file_cases(), *changed_schema_cases()]
