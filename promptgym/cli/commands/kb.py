"""``promptgym kb build | add | search | info``: a knowledge base of documents, from the shell.

    promptgym kb build docs.db ./docs --embedding-model local/multilingual-e5-small
    promptgym kb add docs.db notes/ manual.pdf          # same settings; resumes a killed build too
    promptgym kb build big.db ./corpus --executor ray --workers 4   # embed the batches on Ray workers
    promptgym kb search docs.db "how do I reset it?" -k 5 --type hybrid_fts
    promptgym kb info docs.db

The chunking settings and the embedding model are kept in the database, so
``add`` and ``search`` use the ones ``build`` chose. Rerunning ``build`` or
``add`` after a kill stores only the chunks that were not committed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from promptgym.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, fail
from promptgym.cli.execution import ExecutionError, ExecutionSpec, parse_execution
from promptgym.core.serialization import serialize_object
from promptgym.distributed.ray_executor import RayExecutorError
from promptgym.embedding_models import get as get_embedding_model
from promptgym.knowledge_bases import KnowledgeBase, KnowledgeBaseError
from promptgym.knowledge_bases.documents import DocumentError, chunk_file, find_documents
from promptgym.knowledge_bases.ingest import CHUNK_TABLE, IngestReport, ingest
from promptgym.knowledge_bases.knowledge_base import adapter_class
from promptgym.lm.errors import LMError

kb_app = typer.Typer(help="Knowledge bases of documents: build, add to, search, inspect.", no_args_is_help=True)
SEARCH_TYPES = ("hybrid_fts", "fulltext", "similarity", "regex")
SETTINGS = ("embedding_model", "chunk_size", "overlap")
# build and add take the same two options (train's flags, for where the chunks are embedded)
EXECUTOR_OPTION = typer.Option(None, "--executor", help="Where the chunks are embedded: local (this process; the "
                               "default), ray (a local Ray instance owned by the command; in a Ray job, its cluster) "
                               "or ray://HOST:PORT.")
WORKERS_OPTION = typer.Option(None, "--workers", help="Ray workers (actors) for --executor ray (default 2).")


def _embedding_model(spec: str) -> Any:
    """None for "none"; a model string; or a JSON config ``{"class_name": ..., "config": ...}``."""
    if spec.strip().lower() == "none":
        return None
    try:
        return get_embedding_model(json.loads(spec) if spec.lstrip().startswith("{") else spec)
    except (ValueError, TypeError, LMError) as error:
        fail(f"--embedding-model {spec!r}: {error}")


def _open(database: str, embedding_model: Any = "stored", read_only: bool = False) -> KnowledgeBase:
    try:
        kb = KnowledgeBase(uri=str(database), read_only=read_only)
        if embedding_model == "stored":
            stored = kb.sql_adapter.get_setting("embedding_model")
            embedding_model = get_embedding_model(json.loads(stored)) if stored else None
        kb.sql_adapter.embedding_model = embedding_model
        kb.embedding_model = embedding_model
        return kb
    except (KnowledgeBaseError, ValueError) as error:
        fail(str(error))


def stored_at(database: str) -> Path:
    """Where a knowledge base's uri keeps it (the DuckDB file, or the LanceDB directory), as its adapter reads it.

    >>> str(stored_at("lancedb://./kb")), str(stored_at("duckdb://kb.db")), str(stored_at("kb.db"))
    ('kb', 'kb.db', 'kb.db')
    """
    return Path(adapter_class(database).resolve_uri(database, None))


def size_of(path: Path) -> int:
    """Bytes on disk: a file's, or every file's under a directory."""
    return path.stat().st_size if path.is_file() else sum(item.stat().st_size for item in path.rglob("*")
                                                          if item.is_file())


def _documents(paths: list[Path]) -> list[Path]:
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        fail(f"no such file or directory: {', '.join(missing)}")
    found = list(find_documents(list(paths)))
    if not found:
        fail(f"no documents under {', '.join(map(str, paths))} (supported: .txt .md .html .pdf and other text files)")
    return found


def _execution(executor: str | None, workers: int | None) -> ExecutionSpec:
    try:
        return parse_execution(executor or "local", workers)
    except ExecutionError as error:
        fail(str(error))


def _ingest(kb: KnowledgeBase, files: list[Path], chunk_size: int, overlap: int, batch_size: int,
            execution: ExecutionSpec) -> IngestReport:
    total = 0
    for path in files:  # counted first, so the bar knows its end (chunking is cheap next to embedding)
        try:
            total += len(chunk_file(path, chunk_size=chunk_size, overlap=overlap))
        except (DocumentError, OSError):
            pass
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("chunks"),
               TimeRemainingColumn())
    handled = [0]

    def advance(count: int) -> None:
        handled[0] += count
        progress.advance(task, count)

    database = kb.adapter.uri
    executor = execution.executor() if kb.embedding_model is not None else None
    if kb.embedding_model is None:
        console.print("no embedding model: nothing to embed (full-text search only)", markup=False)
    elif executor is None:
        console.print("embedding in this process (--executor local)", markup=False)
    else:
        console.print(f"embedding on {execution.workers} Ray worker(s) of {execution.where()}; chunks are written "
                      "here", markup=False, soft_wrap=True)

    async def run() -> IngestReport:
        try:
            return await ingest(kb, files, chunk_size=chunk_size, overlap=overlap, batch_size=batch_size,
                                on_file=lambda source, _: progress.update(task, description=escape(source)),
                                on_batch=advance, executor=executor)
        finally:
            if executor is not None:
                await executor.close()

    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("ingesting", total=total)
        try:
            report = asyncio.run(run())
        except KeyboardInterrupt:
            progress.stop()
            kb.close()
            console.print(f"interrupted: {database}: {handled[0]} of {total} chunks handled; the chunks committed so "
                          "far are kept: rerun the same command to resume", markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (LMError, KnowledgeBaseError, ValueError, RayExecutorError) as error:
            progress.stop()
            kb.close()
            what = "embedding" if isinstance(error, (LMError, RayExecutorError)) else "storing"
            fail(f"{database}: {what} failed after {handled[0]} of {total} chunks: {error}; the chunks committed "
                 "so far are kept: fix the cause and rerun the same command to resume")
    return report


def _print_report(report: IngestReport, database: str) -> None:
    console.print(f"{database}: {report.files} files, {report.chunks} chunks: {report.added} added, "
                  f"{report.already_stored} already stored, {report.removed} stale removed", markup=False,
                  soft_wrap=True)
    for source, problem in report.failed:
        console.print(f"skipped {problem}" if problem.startswith(source) else f"skipped {source}: {problem}",
                      markup=False, soft_wrap=True)


@kb_app.command("build")
def build_command(
    database: str = typer.Argument(..., help="The DuckDB file to create (or to finish building), or lancedb://DIR for a LanceDB directory."),
    paths: list[Path] = typer.Argument(..., help="Files and directories to load."),
    embedding_model: str = typer.Option("local/multilingual-e5-small", "--embedding-model",
                                        help="A model string, a JSON config, or 'none' for full-text search only."),
    chunk_size: int = typer.Option(1000, "--chunk-size", min=50, help="Characters per chunk at most."),
    overlap: int = typer.Option(100, "--overlap", min=0, help="Characters shared by neighbouring chunks."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Chunks embedded and committed together."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete what the file holds and start over."),
    executor: Optional[str] = EXECUTOR_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
) -> None:
    """Create a knowledge base from documents (rerun after a kill: it resumes)."""
    if overlap >= chunk_size:
        fail(f"--overlap ({overlap}) must be below --chunk-size ({chunk_size})")
    execution = _execution(executor, workers)
    files = _documents(paths)
    model = _embedding_model(embedding_model)
    settings = {"embedding_model": json.dumps(serialize_object(model)) if model is not None else "",
                "chunk_size": str(chunk_size), "overlap": str(overlap)}
    kb = _open(database, embedding_model=model)
    adapter = kb.sql_adapter
    if fresh:
        adapter.wipe_database()
    stored = {key: adapter.get_setting(key) for key in SETTINGS}
    if any(value is not None for value in stored.values()) and stored != settings:
        changed = [key for key in SETTINGS if stored[key] != settings[key]]
        fail(f"{database} was built with other settings ({', '.join(f'{key}: {stored[key]!r} now {settings[key]!r}' for key in changed)}); "
             "use `promptgym kb add` to add documents with its settings, or --fresh to rebuild it")
    for key, value in settings.items():
        adapter.set_setting(key, value)
    report = _ingest(kb, files, chunk_size, overlap, batch_size, execution)
    _print_report(report, database)
    kb.close()
    if report.failed and not report.files:
        raise typer.Exit(EXIT_FAILED)


@kb_app.command("add")
def add_command(
    database: str = typer.Argument(..., help="A knowledge base made by `promptgym kb build` (a DuckDB file or lancedb://DIR)."),
    paths: list[Path] = typer.Argument(..., help="Files and directories to load."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Chunks embedded and committed together."),
    executor: Optional[str] = EXECUTOR_OPTION,
    workers: Optional[int] = WORKERS_OPTION,
) -> None:
    """Add documents with the settings the knowledge base was built with (an edited file replaces its chunks)."""
    if not stored_at(database).exists():
        fail(f"{database}: no such knowledge base (create it with `promptgym kb build {database} PATHS...`)")
    execution = _execution(executor, workers)
    files = _documents(paths)
    kb = _open(database)
    chunk_size = kb.sql_adapter.get_setting("chunk_size")
    overlap = kb.sql_adapter.get_setting("overlap")
    if chunk_size is None or overlap is None:
        fail(f"{database} was not made by `promptgym kb build` (no chunking settings in it)")
    report = _ingest(kb, files, int(chunk_size), int(overlap), batch_size, execution)
    _print_report(report, database)
    kb.close()


@kb_app.command("search")
def search_command(
    database: str = typer.Argument(..., help="The knowledge base (a DuckDB file or lancedb://DIR)."),
    query: str = typer.Argument(..., help="What to look for."),
    k: int = typer.Option(5, "-k", "--k", min=1, help="How many chunks."),
    search_type: str = typer.Option("hybrid_fts", "--type", help=f"One of {', '.join(SEARCH_TYPES)}."),
    table: str = typer.Option(CHUNK_TABLE, "--table", help="The table to search."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON lines."),
) -> None:
    """Search the knowledge base and print the best chunks with their source."""
    if search_type not in SEARCH_TYPES:
        fail(f"--type: expected one of {', '.join(SEARCH_TYPES)}, got {search_type!r}")
    if not stored_at(database).exists():
        fail(f"{database}: no such knowledge base")
    kb = _open(database, read_only=True)  # alongside a server that has the file open read-only
    if search_type == "similarity" and kb.embedding_model is None:
        fail(f"{database} has no embedding model (built with --embedding-model none): use --type fulltext")
    method = {"hybrid_fts": kb.hybrid_fts_search, "fulltext": kb.fulltext_search,
              "similarity": kb.similarity_search, "regex": kb.regex_search}[search_type]
    try:
        rows = asyncio.run(method(query, table_name=table, k=k))
    except (KnowledgeBaseError, ValueError, RuntimeError) as error:
        fail(str(error))
    kb.close()
    if as_json:
        for row in rows:
            console.print(json.dumps(row, ensure_ascii=False, default=str), markup=False, soft_wrap=True)
        return
    if not rows:
        console.print("no match", markup=False)
        return
    view = Table("score", "source", "where", "text", show_lines=True)
    for row in rows:
        where = (f"page {row['page']}, " if row.get("page") else "") + f"chunk {row.get('position', '-')}"
        text = str(row.get("text", row))
        view.add_row(f"{row.get('score', 0):.3f}" if row.get("score") is not None else "-", escape(str(row.get("source", "-"))),
                     where, escape(text if len(text) <= 400 else text[:400] + "..."))
    console.print(view)


@kb_app.command("info")
def info_command(database: str = typer.Argument(..., help="The knowledge base (a DuckDB file or lancedb://DIR).")) -> None:
    """Tables, row counts, the embedding model and dimension, the documents' sources."""
    if not stored_at(database).exists():
        fail(f"{database}: no such knowledge base")
    kb = _open(database, embedding_model=None, read_only=True)
    adapter = kb.sql_adapter
    console.print(f"{database}: {size_of(stored_at(database)) / 1e6:.1f} MB", markup=False)
    stored = adapter.get_setting("embedding_model")
    if stored is not None:
        model = json.loads(stored).get("config", {}).get("model") if stored else "none (full-text search only)"
        console.print(f"embedding model: {model}; chunk size {adapter.get_setting('chunk_size')}, overlap "
                      f"{adapter.get_setting('overlap')}", markup=False, soft_wrap=True)
    view = Table("table", "rows", "vectors", "fields")
    for entry in adapter.table_info():
        vectors = f"{entry['dimension']}-d ({entry['embedding_model']})" if entry["dimension"] else "-"
        view.add_row(entry["table"], str(entry["rows"]), escape(vectors), ", ".join(entry["fields"]))
    console.print(view)
    if any(entry["table"] == CHUNK_TABLE for entry in adapter.table_info()):
        sources = asyncio.run(kb.sql(f"SELECT source, count(*) AS chunks FROM {CHUNK_TABLE} GROUP BY source "
                                     "ORDER BY source"))
        console.print(f"{len(sources)} documents: " + ", ".join(f"{row['source']} ({row['chunks']})"
                                                            for row in sources[:20])
                      + (" ..." if len(sources) > 20 else ""), markup=False, soft_wrap=True)
    kb.close()

