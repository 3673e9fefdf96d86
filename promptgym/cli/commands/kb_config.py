"""The train config's ``[knowledge]`` table: open (or build/refresh) the knowledge base and give it to the program.

    [knowledge]
    path = "docs.db"                      # relative to the config file
    sources = ["docs/"]                   # optional: ingested before the run (resumes, no duplicate chunks)
    embedding_model = "local/multilingual-e5-small"   # default: the one the file was built with

A ``[program.factory]`` that takes ``knowledge_base=`` gets it; a saved
program (``program.path``) or a factory's program has the knowledge base of
every knowledge module (``RetrieveKnowledge``, ``UpdateKnowledge``,
``Text2SQL``...) replaced by this one; a ``[program.generator]`` becomes
``Input -> RetrieveKnowledge -> Generator``. Problems are ConfigErrors
naming the ``knowledge.*`` key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from promptgym.cli.config import ConfigError, KnowledgeSection
from promptgym.core.serialization import serialize_object
from promptgym.embedding_models import get as get_embedding_model
from promptgym.knowledge_bases import KnowledgeBase, KnowledgeBaseError
from promptgym.knowledge_bases.documents import find_documents
from promptgym.knowledge_bases.ingest import IngestReport, ingest
from promptgym.lm.errors import LMError
from promptgym.modules.knowledge import RetrieveKnowledge

DEFAULT_EMBEDDING_MODEL = "local/multilingual-e5-small"
"""What ``promptgym kb build`` embeds with when none is named (the same default here)."""


def _model_config(model: Any) -> str:
    """How the file records its embedding model (as ``promptgym kb build`` does): JSON, or "" for none."""
    return json.dumps(serialize_object(model)) if model is not None else ""


def embedding_model_of(spec: Any, stored: str | None, building: bool) -> Any:
    """The ``knowledge.embedding_model`` as a model (None for "none"); default: the stored one, else kb build's."""
    if spec is None:
        if stored is not None:
            return get_embedding_model(json.loads(stored)) if stored else None
        spec = DEFAULT_EMBEDDING_MODEL if building else "none"
    if isinstance(spec, str) and spec.strip().lower() == "none":
        return None
    try:
        return get_embedding_model(json.loads(spec) if isinstance(spec, str) and spec.lstrip().startswith("{")
                                   else spec)
    except (ValueError, TypeError, LMError) as error:
        raise ConfigError(f"knowledge.embedding_model: {spec!r}: {error}") from None


async def open_knowledge_base(section: KnowledgeSection) -> tuple[KnowledgeBase, IngestReport | None]:
    """The knowledge base ``[knowledge]`` names, after ingesting its ``sources`` (None: nothing to ingest)."""
    path = Path(section.path)
    missing = [source for source in section.sources if not Path(source).exists()]
    if missing:
        raise ConfigError(f"knowledge.sources: no such file or directory: {', '.join(missing)}")
    if not section.sources and not path.is_file():
        raise ConfigError(f"knowledge.path: {path}: no such knowledge base; build it with `promptgym kb build {path} "
                          "DOCS...`, or list the documents in knowledge.sources to build it before the run")
    try:
        kb = KnowledgeBase(uri=str(path))
    except (KnowledgeBaseError, ValueError) as error:
        raise ConfigError(f"knowledge.path: {error}") from None
    try:
        adapter = kb.adapter
        stored = adapter.get_setting("embedding_model")
        model = embedding_model_of(section.embedding_model, stored, building=bool(section.sources))
        if stored is not None and stored != _model_config(model):
            raise ConfigError(f"knowledge.embedding_model: {path} was embedded with {stored or 'none'} but the "
                              f"config names {_model_config(model) or 'none'}; leave the key out to use the file's, "
                              "or rebuild the file with `promptgym kb build --fresh`")
        adapter.embedding_model = kb.embedding_model = model
        report = await _refresh(kb, section) if section.sources else None
    except BaseException:
        kb.close()
        raise
    return kb, report


async def _refresh(kb: KnowledgeBase, section: KnowledgeSection) -> IngestReport:
    """Ingest the sources with the file's chunking settings (refused if they differ from the config's)."""
    adapter = kb.adapter
    wanted = {"chunk_size": str(section.chunk_size), "overlap": str(section.overlap)}
    for key, value in wanted.items():
        stored = adapter.get_setting(key)
        if stored is not None and stored != value:
            raise ConfigError(f"knowledge.{key}: {section.path} was built with {key} {stored}, the config says "
                              f"{value}; use {stored}, or rebuild the file with `promptgym kb build --fresh`")
    if not list(find_documents(list(section.sources))):
        raise ConfigError(f"knowledge.sources: no documents under {', '.join(section.sources)} (supported: .txt .md "
                          ".html .pdf and other text files)")
    try:
        for key, value in {**wanted, "embedding_model": _model_config(kb.embedding_model)}.items():
            adapter.set_setting(key, value)
        return await ingest(kb, list(section.sources), table_name=section.table, chunk_size=section.chunk_size,
                            overlap=section.overlap)
    except (KnowledgeBaseError, LMError) as error:
        raise ConfigError(f"knowledge.sources: ingesting into {section.path} failed: {error}") from None


def knowledge_modules(program: Any) -> list[Any]:
    """The modules of ``program`` that hold a knowledge base."""
    return [module for module in program._flatten_modules() if hasattr(module, "knowledge_base")]  # noqa: SLF001


def attach_knowledge_base(program: Any, kb: KnowledgeBase, where: str) -> Any:
    """Point every knowledge module of ``program`` at ``kb``; a ConfigError if it has none."""
    modules = knowledge_modules(program)
    if not modules:
        raise ConfigError(f"knowledge: the program of {where} has no knowledge module (RetrieveKnowledge, "
                          "UpdateKnowledge, Text2SQL...) and its factory takes no knowledge_base= argument; remove "
                          "[knowledge] or use a RAG program")
    for module in modules:
        previous = module.knowledge_base
        module.knowledge_base = kb
        if previous is not kb and hasattr(previous, "close"):
            previous.close()  # the file the saved program named: no longer used
    return program


def retriever_for(section: KnowledgeSection, kb: KnowledgeBase, language_model: Any) -> RetrieveKnowledge:
    """The retrieval step a ``[program.generator]`` program gets: the config's table, ``k`` and search type."""
    tables = [model for model in kb.get_symbolic_data_models()
              if model.get_schema().get("title") == section.table]
    if not tables:
        known = [model.get_schema().get("title") for model in kb.get_symbolic_data_models()]
        raise ConfigError(f"knowledge.table: {section.path} has no table {section.table!r} (tables: "
                          f"{', '.join(map(str, known)) or 'none'})")
    if kb.embedding_model is None and section.search_type == "similarity":
        raise ConfigError(f"knowledge.search_type: 'similarity' needs an embedding model and {section.path} has none "
                          "(knowledge.embedding_model); use 'fulltext' or 'hybrid_fts' (BM25 alone without vectors)")
    return RetrieveKnowledge(knowledge_base=kb, language_model=language_model, data_models=tables,
                             search_type=section.search_type, k=section.k, name="retriever")
