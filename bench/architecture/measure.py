"""The shape of the package, read from its source: what issue 26 measures before and after the refactor.

    .venv/bin/python bench/architecture/measure.py [--json bench/results/architecture_after.json]

Counts: import cycles between modules (top-level imports only, then with function-level imports too), per
package; function-level imports by what they import (heavy dependency, promptgym, other); functions over 40 and
80 code lines and the largest function and class; tests of a job's type as a string outside the flow table; and
the `duplicates` pairs inside promptgym/ (when that command is on the PATH).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "promptgym"
HEAVY = {"torch", "transformers", "peft", "ray", "matplotlib", "llama_cpp", "trl", "datasets", "accelerate",
         "mlflow", "opentelemetry", "tensorboard", "vllm", "gguf", "mcp", "uvicorn", "fastapi", "optuna"}
# A job's type compared with a literal ("sft", "rl", "prompt_learning") or looked up in a table of its own.
JOB_TYPE_TEST = re.compile(r"""(\btype\b|job_type|\bkind\b)\s*(==|!=|in|not in)\s*[\(\[{]?\s*["'](prompt_learning|sft|rl)["']"""
                           r"""|job_type\s+in\s+[A-Z_]+|\[(job_type|config\.job\.type)\]""")
FLOW_TABLE = "promptgym/cli/flows/__init__.py"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, tuple[Path, ast.Module]]:
    return {module_name(path): (path, ast.parse(path.read_text(), str(path))) for path in PACKAGE.rglob("*.py")}


def imported(node: ast.Import | ast.ImportFrom, here: str, is_package: bool, known: set[str]) -> list[str]:
    """The promptgym modules one import statement loads (a `from X import name` counts X.name when that is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "promptgym"]
    base = node.module or ""
    if node.level:
        anchor = here.split(".") if is_package else here.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    if base.split(".")[0] != "promptgym":
        return []
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


def function_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [node for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))]
    return list({id(node): node for node in found}.values())


def top_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported (module body, including if/try blocks, not TYPE_CHECKING)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                found.append(statement)
            elif isinstance(statement, ast.If) and "TYPE_CHECKING" not in ast.unparse(statement.test):
                visit(statement.body)
                visit(statement.orelse)
            elif isinstance(statement, ast.Try):
                visit(statement.body)
                for handler in statement.handlers:
                    visit(handler.body)
    visit(tree.body)
    return found


def graph(found: dict[str, tuple[Path, ast.Module]], with_functions: bool) -> nx.DiGraph:
    known = set(found)
    edges = nx.DiGraph()
    edges.add_nodes_from(known)
    for name, (path, tree) in found.items():
        nodes = top_level(tree) + (function_level(tree) if with_functions else [])
        for node in nodes:
            for target in imported(node, name, path.name == "__init__.py", known):
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                # A package importing its own submodules is how __init__ re-exports work, not a cycle.
                if target in known and target != name and not target.startswith(name + "."):
                    edges.add_edge(name, target)
    return edges


def cycles(edges: nx.DiGraph) -> dict[str, int]:
    """Strongly connected groups of more than one module, by the package they sit in (or 'across')."""
    counted: Counter[str] = Counter()
    for group in nx.strongly_connected_components(edges):
        if len(group) > 1:
            packages = {".".join(name.split(".")[:2]) for name in group}
            counted[packages.pop() if len(packages) == 1 else "across packages"] += len(group)
    return dict(counted)


def function_imports(found: dict[str, tuple[Path, ast.Module]]) -> dict[str, int]:
    reasons: Counter[str] = Counter()
    for _name, (_path, tree) in found.items():
        for node in function_level(tree):
            roots = [alias.name.split(".")[0] for alias in node.names] if isinstance(node, ast.Import) else \
                [(node.module or "promptgym").split(".")[0] if not node.level else "promptgym"]
            root = roots[0]
            reasons["promptgym" if root == "promptgym" else "heavy" if root in HEAVY else "other"] += 1
    return dict(reasons)


def code_lines(node: ast.AST, source: list[str]) -> int:
    """Lines of a definition that are neither blank, comments nor its docstring."""
    docstring = set()
    body = getattr(node, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        docstring = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for number in range(node.lineno, node.end_lineno + 1)
               if number not in docstring and source[number - 1].strip()
               and not source[number - 1].strip().startswith("#"))


def sizes(found: dict[str, tuple[Path, ast.Module]]) -> dict:
    functions: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    for name, (path, tree) in found.items():
        source = path.read_text().splitlines()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((code_lines(node, source), f"{name}.{node.name}"))
            elif isinstance(node, ast.ClassDef):
                classes.append((code_lines(node, source), f"{name}.{node.name}"))
    functions.sort(reverse=True)
    classes.sort(reverse=True)
    return {"functions_over_40": sum(1 for lines, _ in functions if lines > 40),
            "functions_over_80": [f"{label} ({lines})" for lines, label in functions if lines > 80],
            "largest_function": f"{functions[0][1]} ({functions[0][0]})",
            "largest_class": f"{classes[0][1]} ({classes[0][0]})"}


def job_type_tests() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative == FLOW_TABLE:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if JOB_TYPE_TEST.search(line):
                found.append(f"{relative}:{number}")
    return found


def duplicate_pairs() -> str:
    if shutil.which("duplicates") is None:
        return "duplicates not on PATH"
    done = subprocess.run(["duplicates", "--repo", str(PACKAGE), "--most", "1", "--seconds", "120"],
                          capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.stdout else done.stderr.strip()


def measure() -> dict:
    found = modules()
    return {"modules": len(found),
            "cycles_at_import": cycles(graph(found, with_functions=False)),
            "cycles_with_function_imports": cycles(graph(found, with_functions=True)),
            "function_level_imports": function_imports(found),
            **sizes(found),
            "job_type_tests": job_type_tests(),
            "duplicates": duplicate_pairs()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    numbers = measure()
    print(json.dumps(numbers, indent=1))
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=1) + "\n")


if __name__ == "__main__":
    main()
