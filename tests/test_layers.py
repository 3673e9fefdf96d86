"""The layers import downwards only (docs/architecture.md): no module imports a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "promptgym"
ORDER = ["core", "stats", "lm", "modules", "rewards", "metrics", "rollouts", "optimizers", "training", "programs", "export",
         "serving",
         "finetune"]


def imported_layers(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("promptgym"):
            names = [node.module] if node.module != "promptgym" else [f"promptgym.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.startswith("promptgym.")]
        found += [(node.lineno, name.split(".")[1]) for name in names if name.count(".") >= 1]
    return found


def test_no_layer_imports_a_layer_above_it():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = path.relative_to(PACKAGE).parts[0]
        if layer not in ORDER:
            continue
        for line, target in imported_layers(path):
            if target in ORDER and ORDER.index(target) > ORDER.index(layer):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports promptgym.{target}")
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from promptgym.training.fit import fit_program\n")
    assert imported_layers(module) == [(2, "training")]
