"""A tuned e5 file as an embedding model string: installed under its hash, registered, run, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from promptgym.lm import EmbeddingModel, UnknownModelError
from promptgym.lm.errors import EngineMissingError
from promptgym.lm.finetuned_models import finetuned_model, list_finetuned_models
from promptgym.lm.tuned_embedders import file_sha256, install_tuned_e5

TEXTS = ["Who plays the oboe?", "Orlan Vesk is a glassblower born in Tarvel."]


@pytest.fixture(autouse=True)
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


@pytest.fixture(scope="module")
def tuned_file(e5_weights, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model with the last layer's output LayerNorm bias moved (a stand-in for BitFit's change)."""
    from promptgym.lm.e5_weights import E5Weights, write_e5

    moved = e5_weights.tensors["l11.oln.b"] + np.random.default_rng(0).normal(0, 0.2, 384).astype(np.float32)
    weights = E5Weights(e5_weights.config, e5_weights.vocab, {**e5_weights.tensors, "l11.oln.b": moved},
                        dict(e5_weights.formats))
    return write_e5(weights, tmp_path_factory.mktemp("tuned") / "e5-tuned.bin")


async def test_an_installed_file_is_named_by_its_hash_and_runs_by_name(tuned_file: Path, models_dir: Path) -> None:
    sha = file_sha256(tuned_file)
    entry = install_tuned_e5(tuned_file, details={"rows": 3})
    assert entry.name == f"ft-e5-{sha[:12]}" and entry.model_string == f"local/ft-e5-{sha[:12]}"
    assert Path(entry.merged) == models_dir / "e5" / f"{sha}.bin" and file_sha256(entry.merged) == sha
    assert finetuned_model(entry.name).details == {"rows": 3, "kind": "e5-embedder", "sha256": sha}
    assert install_tuned_e5(tuned_file) == entry and len(list_finetuned_models()) == 1  # the same file: one entry
    tuned = EmbeddingModel(model=entry.model_string)
    base = EmbeddingModel()
    mine, theirs = await tuned(TEXTS), await base(TEXTS)
    assert mine.shape == theirs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-4)
    cosines = (mine * theirs).sum(axis=1)
    assert (cosines < 0.999).all() and (cosines > 0.5).all()  # other weights, the same space
    # the cache identity holds the weights' hash: no other model's vectors come back
    from promptgym.lm.cache import request_key

    assert tuned._key("a") == request_key({"embedding_model": entry.model_string, "api_base": None, "text": "a",
                                           "weights_sha256": sha}) != base._key("a")
    again = EmbeddingModel.from_config(tuned.get_config())
    assert np.allclose(await again(TEXTS), mine)


async def test_a_missing_or_corrupt_file_is_a_clear_error_naming_it(tuned_file: Path) -> None:
    entry = install_tuned_e5(tuned_file)
    Path(entry.merged).write_bytes(b"E5S1 not the weights")
    with pytest.raises(EngineMissingError, match=rf"{entry.model_string}: its model file {entry.merged} is corrupt"):
        await EmbeddingModel(model=entry.model_string)(TEXTS)
    Path(entry.merged).unlink()
    with pytest.raises(EngineMissingError, match=rf"its model file {entry.merged} is missing"):
        await EmbeddingModel(model=entry.model_string)(TEXTS)


def test_an_unknown_tuned_name_is_refused_at_construction() -> None:
    with pytest.raises(UnknownModelError, match=r"unknown local embedding model 'ft-e5-000000000000'.*tuned ones"):
        EmbeddingModel(model="local/ft-e5-000000000000")


def test_a_tuned_embedder_is_no_language_model(tuned_file: Path) -> None:
    from promptgym.lm.local_models import check_local_model

    entry = install_tuned_e5(tuned_file)
    with pytest.raises(UnknownModelError, match=rf"local/{entry.name} is a tuned embedding model"):
        check_local_model(entry.name)
