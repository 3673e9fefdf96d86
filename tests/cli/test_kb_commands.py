"""``promptgym kb build | add | search | info`` on a small corpus, with a deterministic fake embedder."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.testing import HashEmbeddingModel  # noqa: F401 - registers the class the --embedding-model JSON names

runner = CliRunner()
FAKE = json.dumps({"class_name": "HashEmbeddingModel", "config": {"model": "local/multilingual-e5-small",
                                                                  "dimensions": 32}})


def corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "foxes.txt").write_text("Foxes are quick animals. They live in forests and hunt at dusk.", encoding="utf-8")
    (docs / "dogs.md").write_text("# Dogs\n\nDogs are loyal companions and sleep a lot.", encoding="utf-8")
    return docs


LANCEDB = pytest.mark.skipif(importlib.util.find_spec("lancedb") is None, reason="the lancedb extra is not installed")


@pytest.mark.parametrize("store", ["duckdb", pytest.param("lancedb", marks=LANCEDB)])
def test_build_search_add_and_info(tmp_path: Path, store: str) -> None:
    docs = corpus(tmp_path)
    # a LanceDB uri reaches the knowledge base whole (as a Path, lancedb://DIR would lose a slash)
    database = tmp_path / "kb.db" if store == "duckdb" else f"lancedb://{tmp_path / 'kb'}"
    built = runner.invoke(app, ["kb", "build", str(database), str(docs), "--embedding-model", FAKE,
                                "--chunk-size", "200", "--overlap", "20"])
    assert built.exit_code == 0, built.output
    assert "2 files, 2 chunks: 2 added, 0 already stored" in built.output
    found = runner.invoke(app, ["kb", "search", str(database), "quick foxes", "--json", "-k", "1"])
    assert found.exit_code == 0, found.output
    row = json.loads(found.output.strip().splitlines()[0])
    assert row["source"].endswith("foxes.txt") and row["position"] == 0 and "embedding" not in row
    similar = runner.invoke(app, ["kb", "search", str(database), "loyal dogs sleep", "--type", "similarity", "--json"])
    assert json.loads(similar.output.strip().splitlines()[0])["source"].endswith("dogs.md")
    (docs / "owls.txt").write_text("Owls are birds of the night.", encoding="utf-8")
    added = runner.invoke(app, ["kb", "add", str(database), str(docs)])
    assert added.exit_code == 0, added.output
    assert "3 files, 3 chunks: 1 added, 2 already stored" in added.output
    info = runner.invoke(app, ["kb", "info", str(database)], env={"COLUMNS": "200"})
    assert info.exit_code == 0, info.output
    assert "Chunk" in info.output and "32-d" in info.output and "3 documents" in info.output
    assert "chunk size 200, overlap 20" in info.output
    if store == "lancedb":
        assert (tmp_path / "kb").is_dir() and not list(tmp_path.glob("lancedb*"))
        assert "no such knowledge base" in runner.invoke(app, ["kb", "info", f"lancedb://{tmp_path / 'none'}"]).output


def test_build_refuses_other_settings_and_bad_paths(tmp_path: Path) -> None:
    docs = corpus(tmp_path)
    database = tmp_path / "kb.db"
    assert runner.invoke(app, ["kb", "build", str(database), str(docs), "--embedding-model", "none"]).exit_code == 0
    again = runner.invoke(app, ["kb", "build", str(database), str(docs), "--embedding-model", "none",
                                "--chunk-size", "300"])
    assert again.exit_code == 2 and "chunk_size: '1000' now '300'" in again.output
    fresh = runner.invoke(app, ["kb", "build", str(database), str(docs), "--embedding-model", "none",
                                "--chunk-size", "300", "--fresh"])
    assert fresh.exit_code == 0 and "2 added" in fresh.output
    missing = runner.invoke(app, ["kb", "build", str(tmp_path / "x.db"), str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.output
    assert "no such knowledge base" in runner.invoke(app, ["kb", "search", str(tmp_path / "y.db"), "q"]).output
    vectorless = runner.invoke(app, ["kb", "search", str(database), "q", "--type", "similarity"])
    assert vectorless.exit_code == 2 and "no embedding model" in vectorless.output
    assert "Traceback" not in missing.output + vectorless.output
