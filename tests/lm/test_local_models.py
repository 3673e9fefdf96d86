import hashlib
import sys

import pytest

from promptgym.lm import local_models
from promptgym.lm.errors import ChecksumMismatchError, EngineMissingError
from promptgym.lm.local_models import LocalModelSpec, ensure_local_model


def fake_parts(tmp_path, monkeypatch, chunks):
    """Install importable packages part1..partN holding the given bytes."""
    parts = []
    for n, chunk in enumerate(chunks, start=1):
        package = tmp_path / f"fakepart{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / "blob.bin").write_bytes(chunk)
        parts.append((f"fakepart{n}", "data/blob.bin"))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tuple(parts)


def register(monkeypatch, parts, content, sha=None):
    spec = LocalModelSpec(name="fake", file_name="fake.gguf", sha256=sha or hashlib.sha256(content).hexdigest(),
                          size=len(content), parts=parts, install="pip install fake")
    monkeypatch.setitem(local_models.LOCAL_MODELS, "fake", spec)
    return spec


def test_assembles_once_and_reuses(tmp_path, monkeypatch):
    parts = fake_parts(tmp_path / "site", monkeypatch, [b"abc", b"def"])
    register(monkeypatch, parts, b"abcdef")
    path = ensure_local_model("fake", models_dir=tmp_path / "models")
    assert path.read_bytes() == b"abcdef"
    mtime = path.stat().st_mtime_ns
    calls = []
    monkeypatch.setattr(local_models, "_assemble", lambda *a: calls.append(a))
    assert ensure_local_model("fake", models_dir=tmp_path / "models") == path
    assert calls == [] and path.stat().st_mtime_ns == mtime


def test_checksum_mismatch_is_reported_and_nothing_is_left(tmp_path, monkeypatch):
    parts = fake_parts(tmp_path / "site", monkeypatch, [b"abc", b"xyz"])
    register(monkeypatch, parts, b"abcdef", sha=hashlib.sha256(b"abcdef").hexdigest())
    with pytest.raises(ChecksumMismatchError, match="expected .*reinstall"):
        ensure_local_model("fake", models_dir=tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_missing_package_says_what_to_install(tmp_path, monkeypatch):
    register(monkeypatch, (("no_such_pkg_xyz", "a.bin"),), b"x")
    with pytest.raises(EngineMissingError, match="pip install fake"):
        ensure_local_model("fake", models_dir=tmp_path)


def test_missing_engine_names_the_extra(monkeypatch):
    from promptgym.lm import local_engine

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(EngineMissingError, match=r"promptgym\[local\]"):
        local_engine._import_llama_cpp()
