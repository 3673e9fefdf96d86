"""Files into a knowledge base's ``Chunk`` table, resumable after a kill.

    report = await ingest(kb, ["docs/", "manual.pdf"], chunk_size=800)
    report.added, report.already_stored, report.failed

Each batch of chunks is embedded and written in one transaction; with ``executor=`` (a RayExecutor)
batches are embedded on its workers, several in flight, and written here in order. Chunk ids
are deterministic (source, position, text), so a rerun after a kill finds
the chunks already stored, skips them (no embedding spent on them again),
and adds the rest: no duplicates. Once every chunk of a file is stored, the
chunks an older version of that file left behind are deleted.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

from promptgym.core.json_data_model import JsonDataModel
from promptgym.knowledge_bases.documents import Chunk, DocumentError, chunk_file, find_documents
from promptgym.knowledge_bases.naming import table_identifier

CHUNK_TABLE = "Chunk"


@dataclass
class IngestReport:
    """What one ingestion did: files read, chunks found, added, already there, removed as stale, files refused."""

    files: int = 0
    chunks: int = 0
    added: int = 0
    already_stored: int = 0
    removed: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)


def chunk_records(chunks: list[Chunk], table: str) -> list[JsonDataModel]:
    schema = Chunk.get_schema()
    schema["title"] = table
    return [JsonDataModel(json=chunk.model_dump(mode="json"), schema=schema, name=chunk.id) for chunk in chunks]


class Embedder(Protocol):
    """What an executor's ``embedder(model)`` gives: batches embedded elsewhere, ``window`` of them in flight."""

    window: int

    async def __call__(self, texts: list[str]) -> list[list[float]]: ...


class EmbeddingExecutor(Protocol):
    """An executor that embeds batches on its workers (a RayExecutor: :mod:`promptgym.distributed.embed_workers`)."""

    def embedder(self, embedding_model: Any) -> Embedder: ...


@dataclass
class _Batch:
    """One batch on its way: its chunks, and the task that finds the new ones and embeds them."""

    size: int
    work: "asyncio.Task[tuple[list[Chunk], list[list[float]] | None]]"


@dataclass
class _FileEnd:
    """A file's last batch was queued: once it is written, the file's stale chunks go."""

    source: str
    ids: list[str]


async def ingest(knowledge_base: Any, paths: list[str | Path], *, table_name: str = CHUNK_TABLE,
                 chunk_size: int = 1000, overlap: int = 100, batch_size: int = 64, root: str | Path | None = None,
                 on_file: Callable[[str, int], None] | None = None,
                 on_batch: Callable[[int], None] | None = None,
                 executor: EmbeddingExecutor | None = None) -> IngestReport:
    """Chunk the files (directories are walked) and store the chunks not stored yet.

    Args:
        knowledge_base: a KnowledgeBase; with an embedding model, each chunk's text is embedded.
        table_name: the table the chunks go to.
        chunk_size, overlap: characters per chunk, and shared between neighbours.
        batch_size: chunks embedded and written per transaction.
        root: sources are recorded relative to it (default: as given).
        on_file: called with (source, chunks) when a file has been read; on_batch with the chunks just handled.
        executor: where batches are embedded (default: here, one at a time), e.g. a RayExecutor: its
            ``embedder(model)`` keeps ``window`` batches in flight on its workers; this process still
            writes every batch, in order, one transaction each.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    adapter = knowledge_base.sql_adapter if hasattr(knowledge_base, "sql_adapter") else knowledge_base
    table = table_identifier(table_name)
    report = IngestReport()
    embed: Callable[[list[str]], Awaitable[list[list[float]]]] | None = None
    window = 1
    if adapter.embedding_model is not None:
        embed = adapter.embed_texts
        if executor is not None:
            embed = remote = executor.embedder(adapter.embedding_model)
            window = max(1, remote.window)

    async def prepare(batch: list[Chunk]) -> tuple[list[Chunk], list[list[float]] | None]:
        stored = await adapter.existing_ids([chunk.id for chunk in batch], table_name=table)
        pending = [chunk for chunk in batch if chunk.id not in stored]
        vectors = await embed([chunk.text for chunk in pending]) if pending and embed is not None else None
        return pending, vectors

    async def finish(item: _Batch | _FileEnd) -> None:
        """Write the oldest batch (or end its file): in order, so a file's stale chunks go after all its new ones."""
        if isinstance(item, _FileEnd):
            report.removed += await adapter.delete_others(item.ids, table_name=table, where={"source": item.source})
            return
        pending, vectors = await item.work
        report.already_stored += item.size - len(pending)
        if pending:
            records = chunk_records(pending, table)
            for record, vector in zip(records, vectors or []):
                record.update({"embedding": vector})
            await adapter.update(records)
            report.added += len(pending)
        if on_batch is not None:
            on_batch(item.size)

    queue: deque[_Batch | _FileEnd] = deque()
    try:
        for path in find_documents(list(paths)):
            source = str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)
            try:
                chunks = chunk_file(path, source=source, chunk_size=chunk_size, overlap=overlap)
            except (DocumentError, OSError) as error:
                report.failed.append((source, str(error)))
                continue
            report.files += 1
            report.chunks += len(chunks)
            if on_file is not None:
                on_file(source, len(chunks))
            for start in range(0, len(chunks), batch_size):
                batch = chunks[start:start + batch_size]
                while sum(isinstance(item, _Batch) for item in queue) >= window:
                    await finish(queue.popleft())
                queue.append(_Batch(len(batch), asyncio.ensure_future(prepare(batch))))
            queue.append(_FileEnd(source, [chunk.id for chunk in chunks]))
        while queue:
            await finish(queue.popleft())
    finally:  # an error or a cancel: batches still in flight are dropped (a rerun embeds them), none half-written
        for item in queue:
            if isinstance(item, _Batch):
                item.work.cancel()
        await asyncio.gather(*(item.work for item in queue if isinstance(item, _Batch)), return_exceptions=True)
    if report.added or report.removed:  # index now: a read-only reader (a served program) can't rebuild it
        await adapter.refresh_fulltext_index(table_name=table)
    return report
