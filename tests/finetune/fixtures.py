"""Fixtures shared by the weight-training tests here and in tests/distributed (imported by both)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model built once per session (no download, a fraction of a second to train a step)."""
    from tests.finetune.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread per test: the tiny model's matrices are too small to split, so a second thread only
    waits (on 2 busy cores a step took 3-4x the CPU and wall time). Restored after, for the real models elsewhere."""
    import torch  # deferred: torch is optional, and the conftests skip this folder without it

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def isolated_models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The registry of fine-tuned models lives under the models dir: one per test."""
    monkeypatch.setenv("PROMPTGYM_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


@pytest.fixture
def fake_export(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The tiny model's tokenizer is unknown to llama.cpp's converter: record the export instead of running it."""
    from promptgym.core.events import ModelExported

    calls: list[Path] = []

    def export_files(job, folder, adapter_dir, name, on_event):
        calls.append(adapter_dir)
        path = folder / "export" / f"{name}-q8_0.gguf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"GGUF")
        on_event(ModelExported(part="merged", format="q8_0", path=str(path), size="0.0 MB"))
        return {"merged": str(path)}

    monkeypatch.setattr("promptgym.finetune.weight_run.export_files", export_files)
    return calls
