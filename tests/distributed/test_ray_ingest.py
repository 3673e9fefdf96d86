"""Ingestion with ``executor=RayExecutor(...)``: the chunks a local ingestion stores, embedded on loopback workers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import ray
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.distributed.local_head import LocalRayHead, descendants
from promptgym.distributed.ray_executor import RayExecutor
from promptgym.knowledge_bases import KnowledgeBase
from promptgym.knowledge_bases.ingest import ingest
from promptgym.testing import HashEmbeddingModel
from tests.distributed.embedders import DyingHashEmbedder, SlowHashEmbedder

ROOT = Path(__file__).resolve().parents[2]
ANIMALS = ["fox", "owl", "cat", "dog", "eel", "bee", "elk", "yak", "ant", "bat", "cow", "hen"]
BATCH = 2
CHUNKS = 48  # four sentences a file, one chunk each
runner = CliRunner()


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Twelve small files, four chunks each at chunk_size 60: 24 batches of two."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the workers import tests.distributed.embedders
    folder = tmp_path / "docs"
    folder.mkdir()
    for animal in ANIMALS:
        (folder / f"{animal}.txt").write_text(" ".join(f"The {animal} number {n} walks by the river." for n in range(4)),
                                              encoding="utf-8")
    return folder


def not_connected() -> None:
    assert not ray.is_initialized(), "another test's Ray connection is still open"


async def stored(kb: KnowledgeBase) -> list[dict[str, Any]]:
    rows = await kb.sql("SELECT id, source, position, text, embedding FROM Chunk ORDER BY id")
    return [{**row, "embedding": [float(value) for value in row["embedding"]]} for row in rows]


async def stored_in(database: Path) -> list[dict[str, Any]]:
    kb = KnowledgeBase(uri=str(database), read_only=True)
    try:
        return await stored(kb)
    finally:
        kb.close()


async def ingested_here(folder: Path, tmp_path: Path) -> list[dict[str, Any]]:
    kb = KnowledgeBase(uri=str(tmp_path / "local.db"), embedding_model=HashEmbeddingModel(dimensions=32))
    report = await ingest(kb, [folder], chunk_size=60, overlap=0, batch_size=BATCH, root=folder)
    assert report.added == report.chunks == CHUNKS
    rows = await stored(kb)
    kb.close()
    return rows


async def test_two_workers_store_the_chunks_a_local_ingestion_stores_and_a_rerun_adds_none(
        docs: Path, tmp_path: Path, ray_head: LocalRayHead) -> None:
    not_connected()
    expected = await ingested_here(docs, tmp_path)
    kb = KnowledgeBase(uri=str(tmp_path / "ray.db"), embedding_model=HashEmbeddingModel(dimensions=32))
    executor = RayExecutor(address=ray_head.gcs_address, num_workers=2)
    batches: list[int] = []
    try:
        report = await ingest(kb, [docs], chunk_size=60, overlap=0, batch_size=BATCH, root=docs, executor=executor,
                              on_batch=batches.append)
        again = await ingest(kb, [docs], chunk_size=60, overlap=0, batch_size=BATCH, root=docs, executor=executor)
        embedder = executor.embedder(kb.embedding_model)
        pids = {await actor.__ray_call__.remote(lambda self: os.getpid()) for actor in embedder.actors}
    finally:
        await executor.close()
    assert (report.added, report.already_stored, report.files) == (CHUNKS, 0, 12)
    assert batches == [BATCH] * 24  # the progress bar still advances once per batch
    assert (again.added, again.already_stored, again.removed) == (0, CHUNKS, 0)
    assert await stored(kb) == expected  # same ids, texts and vectors as embedding here
    assert len(pids) == 2 and os.getpid() not in pids and (embedder.retries, embedder.local_batches) == (0, 0)
    kb.close()


async def test_a_worker_killed_mid_ingest_loses_no_chunk(docs: Path, tmp_path: Path, ray_head: LocalRayHead,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    not_connected()
    expected = await ingested_here(docs, tmp_path)
    marker = tmp_path / "died"
    model = DyingHashEmbedder(dimensions=32, die_word="The owl number 2", marker=str(marker))
    kb = KnowledgeBase(uri=str(tmp_path / "ray.db"), embedding_model=model)
    executor = RayExecutor(address=ray_head.gcs_address, num_workers=2)
    try:
        with caplog.at_level(logging.WARNING, logger="promptgym"):
            report = await ingest(kb, [docs], chunk_size=60, overlap=0, batch_size=BATCH, root=docs, executor=executor)
        embedder = executor.embedder(model)
    finally:
        await executor.close()
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker really died, mid-ingest
    assert embedder.retries >= 1 and embedder.local_batches == 0  # its batch went to a worker again
    assert any("died while embedding" in record.getMessage() for record in caplog.records)
    assert (report.added, report.already_stored) == (CHUNKS, 0)
    assert await stored(kb) == expected
    kb.close()


async def test_batches_no_worker_is_left_for_are_embedded_here(docs: Path, tmp_path: Path,
                                                             ray_head: LocalRayHead) -> None:
    not_connected()
    expected = await ingested_here(docs, tmp_path)
    model = DyingHashEmbedder(dimensions=32, driver_pid=os.getpid())  # dies in every process but this one
    kb = KnowledgeBase(uri=str(tmp_path / "ray.db"), embedding_model=model)
    executor = RayExecutor(address=ray_head.gcs_address, num_workers=1, max_restarts=0)
    try:
        report = await ingest(kb, [docs], chunk_size=60, overlap=0, batch_size=BATCH, root=docs, executor=executor)
        embedder = executor.embedder(model)
    finally:
        await executor.close()
    assert report.added == CHUNKS and embedder.local_batches == 24
    assert await stored(kb) == expected
    kb.close()


async def test_a_cancelled_batch_stops_on_its_worker(tmp_path: Path, ray_head: LocalRayHead) -> None:
    not_connected()
    started, finished = tmp_path / "started", tmp_path / "finished"
    model = SlowHashEmbedder(dimensions=8, started=str(started), finished=str(finished), delay=3.0)
    executor = RayExecutor(address=ray_head.gcs_address, num_workers=1)
    try:
        call = asyncio.ensure_future(executor.embedder(model)(["a chunk"]))
        for _ in range(600):  # the actor's start, then the batch's
            if started.exists():
                break
            await asyncio.sleep(0.05)
        assert started.exists()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(4.0)  # past the worker's delay: a call left running would have finished by now
    finally:
        await executor.close()
    assert not finished.exists()


def test_kb_build_embeds_on_its_own_ray_instance_and_stops_it(docs: Path, tmp_path: Path) -> None:
    not_connected()
    fake = json.dumps({"class_name": "HashEmbeddingModel", "config": {"dimensions": 32}})
    flags = ["--embedding-model", fake, "--chunk-size", "60", "--overlap", "0", "--batch-size", str(BATCH)]
    local = runner.invoke(app, ["kb", "build", str(tmp_path / "local.db"), str(docs), *flags])
    assert local.exit_code == 0, local.output
    assert "embedding in this process" in local.output
    before = set(descendants(os.getpid()))
    built = runner.invoke(app, ["kb", "build", str(tmp_path / "ray.db"), str(docs), *flags, "--executor", "ray",
                                "--workers", "2"], env={"COLUMNS": "200"})
    assert built.exit_code == 0, built.output
    assert "embedding on 2 Ray worker(s) of a local Ray instance on 127.0.0.1" in built.output
    assert "12 files, 48 chunks: 48 added, 0 already stored" in built.output
    assert not set(descendants(os.getpid())) - before  # every process of its Ray instance is gone
    assert not ray.is_initialized()
    local_rows, ray_rows = (asyncio.run(stored_in(tmp_path / name)) for name in ("local.db", "ray.db"))
    assert ray_rows == local_rows and len(ray_rows) == CHUNKS


def test_bad_executor_values_are_clear_errors(docs: Path, tmp_path: Path) -> None:
    database = str(tmp_path / "kb.db")
    bad = runner.invoke(app, ["kb", "build", database, str(docs), "--embedding-model", "none", "--executor", "rai"])
    assert bad.exit_code == 2 and "--executor: expected 'local', 'ray' or 'ray://HOST:PORT', got 'rai'" in bad.output
    workers = runner.invoke(app, ["kb", "build", database, str(docs), "--embedding-model", "none", "--workers", "2"])
    assert workers.exit_code == 2 and "--workers needs --executor ray" in workers.output
    assert not Path(database).exists()  # refused before anything was opened
    assert runner.invoke(app, ["kb", "build", database, str(docs), "--embedding-model", "none"]).exit_code == 0
    add = runner.invoke(app, ["kb", "add", database, str(docs), "--executor", "ray://nohost"])
    assert add.exit_code == 2 and "got 'ray://nohost'" in add.output
