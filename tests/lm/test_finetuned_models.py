"""Fine-tuned models as model strings: the registry, resolution to files, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.lm import LanguageModel, UnknownModelError
from promptgym.lm.errors import EngineMissingError
from promptgym.lm.finetuned_models import (
    FineTunedModel,
    finetuned_model,
    list_finetuned_models,
    register_finetuned_model,
    remove_finetuned_model,
)
from promptgym.lm.local_models import resolve_local_model


@pytest.fixture(autouse=True)
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


def gguf(path: Path, size: int = 10) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"G" * size)
    return str(path)


def test_a_registered_model_is_a_model_string(tmp_path: Path) -> None:
    merged = gguf(tmp_path / "run/export/ft-a-q8_0.gguf", 1000)
    register_finetuned_model(FineTunedModel(name="ft-a", base="local/smollm2-135m-instruct", merged=merged,
                                            run=str(tmp_path / "run"), created=1.0))
    register_finetuned_model(FineTunedModel(name="ft-b", base="local/smollm2-135m-instruct", run="r2", created=2.0,
                                            adapter=gguf(tmp_path / "b/lora.gguf"), base_gguf=gguf(tmp_path / "base.gguf")))
    assert [entry.name for entry in list_finetuned_models()] == ["ft-b", "ft-a"]
    assert finetuned_model("ft-a").size_bytes() == 1000
    assert resolve_local_model("ft-a").model_path == Path(merged) and resolve_local_model("ft-a").lora_path is None
    files = resolve_local_model("ft-b")
    assert (files.model_path, files.lora_path) == (tmp_path / "base.gguf", tmp_path / "b/lora.gguf")
    lm = LanguageModel(model="local/ft-a")
    assert lm.get_config()["model"] == "local/ft-a"
    assert LanguageModel.from_config(lm.get_config()).model == "local/ft-a"


def test_unknown_names_missing_files_and_taken_names_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UnknownModelError, match="the fine-tuned ones .see `promptgym models list`."):
        LanguageModel(model="local/ft-nothing")
    register_finetuned_model(FineTunedModel(name="ft-gone", base="local/x", merged=str(tmp_path / "gone.gguf"), run="r1"))
    with pytest.raises(EngineMissingError, match="its files are missing .*gone.gguf"):
        resolve_local_model("ft-gone")
    with pytest.raises(ValueError, match="already exists"):
        register_finetuned_model(FineTunedModel(name="ft-gone", base="local/x", merged="m.gguf", run="another run"))
    with pytest.raises(ValueError, match="embedded model's name"):
        register_finetuned_model(FineTunedModel(name="smollm2-135m-instruct", base="local/x", merged="m.gguf"))
    with pytest.raises(ValueError, match="use letters, digits"):
        register_finetuned_model(FineTunedModel(name="../escape", base="local/x", merged="m.gguf"))
    assert remove_finetuned_model("ft-gone").run == "r1"
    assert finetuned_model("ft-gone") is None


def test_a_reused_name_never_meets_the_old_models_cached_answers(tmp_path: Path) -> None:
    merged = gguf(tmp_path / "m.gguf")
    register_finetuned_model(FineTunedModel(name="ft-x", base="local/b", merged=merged, run="r1", created=1.0))
    first = LanguageModel(model="local/ft-x")._cache_identity
    remove_finetuned_model("ft-x")
    register_finetuned_model(FineTunedModel(name="ft-x", base="local/b", merged=merged, run="r2", created=2.0))
    assert LanguageModel(model="local/ft-x")._cache_identity != first
