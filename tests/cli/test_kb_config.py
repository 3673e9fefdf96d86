"""The train config's ``[knowledge]`` table: a RAG program in a config-driven run gets its knowledge base."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import promptgym as pg
from promptgym.cli.build import build_run_plan
from promptgym.cli.config import ConfigError, load_config
from promptgym.cli.main import app
from promptgym.knowledge_bases import KnowledgeBase
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json
from tests.cli.helpers import GENERATOR_PROGRAM, Answer, Question, only_run, write_config

runner = CliRunner()
CREATURES = {"zorp": "blue", "mabel": "green", "tuck": "red", "quill": "gold"}
EMBEDDER = '{ class_name = "HashEmbeddingModel", config = { model = "local/multilingual-e5-small", dimensions = 32 } }'


def rag_lm() -> ScriptedLanguageModel:
    """The query writer searches for the question; the answerer reads the colour off the best chunk."""

    def respond(request):
        given = last_user_json(request)
        if "result" not in given:
            return {"tables": ["Chunk"], "search": [given["question"]]}
        words = (given["result"][0]["text"] if given["result"] else "").rstrip(".").split()
        return {"answer": words[-1] if words else "?"}

    return ScriptedLanguageModel(respond=respond)


def rag_program(language_model=None, knowledge_base=None) -> pg.Program:
    """Input -> RetrieveKnowledge -> Generator on the knowledge base the config hands over."""
    lm = rag_lm()
    retriever = pg.RetrieveKnowledge(knowledge_base=knowledge_base, language_model=lm, search_type="fulltext", k=1)
    answerer = pg.Generator(data_model=Answer, language_model=lm, name="answerer")
    return pg.Sequential([pg.Input(data_model=Question), retriever, answerer], name="rag")


def corpus_and_data(folder: Path) -> tuple[Path, Path]:
    docs = folder / "docs"
    docs.mkdir()
    for name, colour in CREATURES.items():
        (docs / f"{name}.txt").write_text(f"The creature called {name} is {colour}.", encoding="utf-8")
    data = folder / "colours.jsonl"
    data.write_text("".join(json.dumps({"prompt": name, "label": colour}) + "\n"
                            for name, colour in CREATURES.items()) * 2)
    return docs, data


def knowledge_config(folder: Path, knowledge: str, program: str = '[program]\nfactory = '
                     '"tests.cli.test_kb_config:rag_program"') -> Path:
    _, data = corpus_and_data(folder) if not (folder / "docs").exists() else (None, folder / "colours.jsonl")
    config = write_config(folder, epochs=1, program=program, extra=knowledge)
    text = config.read_text().replace(str(folder / "train.jsonl"), str(data))
    config.write_text(text)
    return config


def test_a_config_builds_the_knowledge_base_from_sources_and_hands_it_to_the_factory(workdir: Path) -> None:
    config = knowledge_config(workdir, f'[knowledge]\npath = "kb.db"\nsources = ["docs"]\nembedding_model = {EMBEDDER}')
    plan = asyncio.run(build_run_plan(load_config([config])))
    retriever = next(module for module in plan.program._flatten_modules() if hasattr(module, "knowledge_base"))
    assert retriever.knowledge_base.adapter.uri == str(workdir / "kb.db")  # relative to the config file
    assert asyncio.run(retriever.knowledge_base.count(table_name="Chunk")) == 4
    answer = asyncio.run(plan.program(Question(question="mabel")))
    assert answer.get("answer") == "green"
    retriever.knowledge_base.close()
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])  # again: resumes, adds nothing
    assert result.exit_code == 0, result.output
    assert only_run(workdir).status()["final"]["reward"] == 1.0
    kb = KnowledgeBase(uri=str(workdir / "kb.db"))
    assert asyncio.run(kb.count(table_name="Chunk")) == 4  # no duplicate chunks after the second ingestion
    assert json.loads(kb.adapter.get_setting("embedding_model"))["class_name"] == "HashEmbeddingModel"
    kb.close()


def test_a_generator_program_becomes_input_retriever_generator(workdir: Path) -> None:
    config = knowledge_config(workdir, '[knowledge]\npath = "kb.db"\nsources = ["docs"]\nembedding_model = "none"\n'
                                       'k = 2', program=GENERATOR_PROGRAM)
    plan = asyncio.run(build_run_plan(load_config([config])))
    names = [module.name for module in plan.program.modules]
    assert names[1:] == ["retriever", "answerer"]
    retriever = plan.program.modules[1]
    assert retriever.settings.get("k") == 2 and retriever.settings.get("search_type") == "hybrid_fts"
    retriever.knowledge_base.close()


def test_a_saved_program_is_pointed_at_the_configured_knowledge_base(workdir: Path) -> None:
    knowledge_config(workdir, "")
    old = KnowledgeBase(uri=str(workdir / "old.db"), embedding_model=HashEmbeddingModel(dimensions=32))
    asyncio.run(old.update([]))
    saved = workdir / "rag.json"
    program = rag_program(knowledge_base=old)
    program.save(str(saved))
    old.close()
    config = knowledge_config(workdir, f'[knowledge]\npath = "kb.db"\nsources = ["docs"]\nembedding_model = {EMBEDDER}',
                              program=f'[program]\npath = "{saved}"')
    plan = asyncio.run(build_run_plan(load_config([config])))
    retrievers = [module for module in plan.program._flatten_modules() if hasattr(module, "knowledge_base")]
    assert retrievers and all(module.knowledge_base.adapter.uri == str(workdir / "kb.db") for module in retrievers)
    retrievers[0].knowledge_base.close()


@pytest.mark.parametrize("knowledge, expected", [
    ('path = "missing.db"', "knowledge.path: "),
    ('path = "kb.db"\nsources = ["nowhere"]', "knowledge.sources: no such file or directory"),
    ('path = "kb.db"\nsorces = ["docs"]', "knowledge.sorces: unknown key"),
    ('path = "kb.db"\nchunk_size = 100\noverlap = 100', "knowledge: overlap (100) must be below chunk_size (100)"),
    ('path = "kb.db"\nsources = ["docs"]\nembedding_model = { class_name = "NoSuchEmbedder" }', "knowledge.embedding_model: "),
    ('path = "kb.db"\nsources = ["docs"]\nembedding_model = "none"\nsearch_type = "similarity"',
     "knowledge.search_type: 'similarity' needs an embedding model"),
])
def test_bad_knowledge_tables_name_the_key(workdir: Path, knowledge: str, expected: str) -> None:
    config = knowledge_config(workdir, "[knowledge]\n" + knowledge, program=GENERATOR_PROGRAM)
    with pytest.raises(ConfigError) as error:
        asyncio.run(build_run_plan(load_config([config])))
    assert expected in str(error.value)


def test_another_embedder_or_chunking_than_the_file_was_built_with_is_refused(workdir: Path) -> None:
    config = knowledge_config(workdir, f'[knowledge]\npath = "kb.db"\nsources = ["docs"]\nembedding_model = {EMBEDDER}')
    asyncio.run(build_run_plan(load_config([config])))
    for extra, expected in (('embedding_model = "none"', "knowledge.embedding_model: "),
                            (f"embedding_model = {EMBEDDER}\nchunk_size = 500", "knowledge.chunk_size: ")):
        other = knowledge_config(workdir, f'[knowledge]\npath = "kb.db"\nsources = ["docs"]\n{extra}')
        with pytest.raises(ConfigError) as error:
            asyncio.run(build_run_plan(load_config([other])))
        assert expected in str(error.value) and "kb.db" in str(error.value)


def test_a_program_without_knowledge_modules_is_refused(workdir: Path) -> None:
    config = knowledge_config(workdir, '[knowledge]\npath = "kb.db"\nsources = ["docs"]\nembedding_model = "none"',
                              program='[program]\nfactory = "tests.cli.helpers:build_program"')
    with pytest.raises(ConfigError, match="knowledge: the program of program.factory has no knowledge module"):
        asyncio.run(build_run_plan(load_config([config])))
