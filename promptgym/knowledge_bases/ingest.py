"""Files into a knowledge base's ``Chunk`` table, resumable after a kill.

    report = await ingest(kb, ["docs/", "manual.pdf"], chunk_size=800)
    report.added, report.already_stored, report.failed

Each batch of chunks is embedded and written in one transaction. Chunk ids
are deterministic (source, position, text), so a rerun after a kill finds
the chunks already stored, skips them (no embedding spent on them again),
and adds the rest: no duplicates. Once every chunk of a file is stored, the
chunks an older version of that file left behind are deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

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


async def ingest(knowledge_base: Any, paths: list[str | Path], *, table_name: str = CHUNK_TABLE,
                 chunk_size: int = 1000, overlap: int = 100, batch_size: int = 64, root: str | Path | None = None,
                 on_file: Callable[[str, int], None] | None = None,
                 on_batch: Callable[[int], None] | None = None) -> IngestReport:
    """Chunk the files (directories are walked) and store the chunks not stored yet.

    Args:
        knowledge_base: a KnowledgeBase; with an embedding model, each chunk's text is embedded.
        table_name: the table the chunks go to.
        chunk_size, overlap: characters per chunk, and shared between neighbours.
        batch_size: chunks embedded and written per transaction.
        root: sources are recorded relative to it (default: as given).
        on_file: called with (source, chunks) when a file has been read; on_batch with the chunks just handled.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    adapter = knowledge_base.sql_adapter if hasattr(knowledge_base, "sql_adapter") else knowledge_base
    table = table_identifier(table_name)
    report = IngestReport()
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
            stored = await adapter.existing_ids([chunk.id for chunk in batch], table_name=table)
            pending = [chunk for chunk in batch if chunk.id not in stored]
            report.already_stored += len(batch) - len(pending)
            if pending:
                records = chunk_records(pending, table)
                if adapter.embedding_model is not None:
                    vectors = await adapter.embed_texts([chunk.text for chunk in pending])
                    for record, vector in zip(records, vectors):
                        record.update({"embedding": vector})
                await adapter.update(records)
                report.added += len(pending)
            if on_batch is not None:
                on_batch(len(batch))
        report.removed += await adapter.delete_others([chunk.id for chunk in chunks], table_name=table,
                                                      where={"source": source})
    if report.added or report.removed:  # index now: a read-only reader (a served program) can't rebuild it
        await adapter.refresh_fulltext_index(table_name=table)
    return report
