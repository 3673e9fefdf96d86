"""The bundled data must ship in the wheel, each file next to its licence."""

import glob
import tomllib
from pathlib import Path

import promptgym.datasets

PKG_DIR = Path(promptgym.datasets.__file__).parent
DATA_DIR = PKG_DIR / "data"
PYPROJECT = PKG_DIR.parents[1] / "pyproject.toml"


def test_every_data_folder_has_a_licence_and_stays_small():
    folders = sorted(p for p in DATA_DIR.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["boolq", "commonsense_qa", "gsm8k", "mmlu_topics", "nq_open"]
    for folder in folders:
        assert (folder / "LICENSE").is_file(), folder
        assert list(folder.glob("*.jsonl.gz")), folder
    total = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert total < 2_000_000


def test_pyproject_package_data_covers_the_data_files():
    # setuptools globs package-data patterns relative to each package folder.
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"].get("package-data", {})
    patterns = [*config.get("*", []), *config.get("promptgym.datasets", [])]
    shipped = {Path(f) for pat in patterns
               for f in glob.glob(pat, root_dir=PKG_DIR, recursive=True)}
    needed = {p.relative_to(PKG_DIR) for p in DATA_DIR.rglob("*")
              if p.is_file() and (p.name.endswith(".jsonl.gz") or p.name == "LICENSE")}
    missing = sorted(str(p) for p in needed - shipped)
    assert not missing, (
        "pyproject.toml [tool.setuptools.package-data] does not ship these files; add "
        '"promptgym.datasets" = ["data/*/*.jsonl.gz", "data/*/LICENSE"]: ' + ", ".join(missing))
