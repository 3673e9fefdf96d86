"""The base model's Hugging Face weights are derived from its GGUF once, then reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgym.finetune.base_model import (BaseModelError, BaseModelSource, _file_lock, ensure_hf_weights,
                                          load_base_model, resolve_base_model)


def test_a_gguf_is_dequantised_once_and_the_copy_is_reused(tiny_model: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    source = BaseModelSource(name="tiny", gguf=gguf, hf_dir=tmp_path / "hf" / "tiny-0123", fingerprint="0123")
    real_model, real_tokenizer = transformers.AutoModelForCausalLM.from_pretrained, transformers.AutoTokenizer.from_pretrained
    read_from_gguf: list[str] = []

    def model_from(folder, gguf_file=None, **kwargs):  # reading a GGUF: stands in with the tiny model's weights
        if gguf_file:
            read_from_gguf.append(gguf_file)
            folder = str(tiny_model)
        return real_model(folder, **kwargs)

    def tokenizer_from(folder, gguf_file=None, **kwargs):
        return real_tokenizer(str(tiny_model) if gguf_file else folder, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", model_from)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer_from)

    assert ensure_hf_weights(source) == source.hf_dir
    assert (source.hf_dir / "config.json").is_file() and list(source.hf_dir.glob("*.safetensors"))
    assert ensure_hf_weights(source) == source.hf_dir
    model, tokenizer = load_base_model(source)  # from the cached copy, not the GGUF
    assert read_from_gguf == ["tiny.gguf"]
    assert model.config.vocab_size == len(tokenizer) and not model.config.use_cache
    assert not [p for p in source.hf_dir.parent.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_a_hugging_face_folder_is_used_as_it_is_and_bad_names_are_explained(tiny_model: Path, tmp_path: Path) -> None:
    source = resolve_base_model(str(tiny_model))
    assert source.gguf is None and source.hf_dir == tiny_model.resolve() and ensure_hf_weights(source) == source.hf_dir
    (tmp_path / "empty").mkdir()
    with pytest.raises(BaseModelError, match="folder has no config.json"):
        resolve_base_model(str(tmp_path / "empty"))
    with pytest.raises(BaseModelError, match="unknown local model; the embedded ones are"):
        resolve_base_model("local/no-such-model")
    with pytest.raises(BaseModelError, match="expected local/<name>"):
        resolve_base_model("openai/gpt-4o")


def test_a_cache_folder_that_links_to_a_place_not_made_yet_is_made_there(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "hf"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "hf").symlink_to(target, target_is_directory=True)
    with _file_lock(tmp_path / "models" / "hf" / "base.lock"):
        assert (target / "base.lock").is_file()
