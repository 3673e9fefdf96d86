"""What the fault bench found (bench/faults/cases_knowledge.py), pinned: damaged files, short embeddings,
queries embedded by another model of the same size."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from promptgym import DataModel
from promptgym.knowledge_bases import KnowledgeBase, KnowledgeBaseError
from promptgym.lm.errors import LMOutputError
from promptgym.testing import HashEmbeddingModel


class Note(DataModel):
    id: str
    text: str


NOTES = [Note(id=str(index), text=f"note number {index} about topic {index % 7}") for index in range(400)]


class ShortEmbedder(HashEmbeddingModel):
    """Returns one vector fewer than it was given texts."""

    async def _embed(self, texts: list[str]) -> np.ndarray:
        return (await super()._embed(texts))[:-1]


def filled(path: Path, model: HashEmbeddingModel) -> None:
    kb = KnowledgeBase(uri=str(path), data_models=[Note], embedding_model=model)
    asyncio.run(kb.update(NOTES))
    kb.close()


async def test_an_embedder_returning_too_few_vectors_is_an_error_not_a_keyerror(tmp_path: Path) -> None:
    kb = KnowledgeBase(uri=str(tmp_path / "kb.db"), data_models=[Note], embedding_model=ShortEmbedder(dimensions=16))
    with pytest.raises(LMOutputError, match="returned 1 vectors for 2 texts"):
        await kb.update(NOTES[:2])
    assert await kb.count(table_name="Note") == 0
    kb.close()


def test_a_query_embedded_by_another_model_of_the_same_size_is_refused(tmp_path: Path) -> None:
    filled(tmp_path / "kb.db", HashEmbeddingModel(dimensions=16))
    other = KnowledgeBase(uri=str(tmp_path / "kb.db"), embedding_model=HashEmbeddingModel(model="openai/other",
                                                                                          dimensions=16))
    with pytest.raises(KnowledgeBaseError, match="not comparable") as error:
        asyncio.run(other.similarity_search("topic 3", table_name="Note", k=2))
    assert "HashEmbeddingModel(openai/other)" in str(error.value)
    other.close()
    same = KnowledgeBase(uri=str(tmp_path / "kb.db"), embedding_model=HashEmbeddingModel(dimensions=16))
    assert len(asyncio.run(same.similarity_search("topic 3", table_name="Note", k=2))) == 2
    same.close()


def test_a_truncated_file_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    filled(path, HashEmbeddingModel(dimensions=16))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(KnowledgeBaseError, match="kb.db") as error:
        kb = KnowledgeBase(uri=str(path))
        asyncio.run(kb.getall(table_name="Note", limit=500))
    assert "damaged" in str(error.value) or "cannot be opened" in str(error.value)
