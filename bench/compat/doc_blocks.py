"""The Python code blocks of synalinks' documentation, and which of them are measured.

The documentation site (``docs/``, built with mkdocstrings) shows:

- guides and code examples: the module docstrings of ``guides/*.py`` and
  ``examples/*.py`` (pages say ``::: guides.3_programs``);
- the API reference: the docstrings of the objects its pages name
  (``::: synalinks.src.rewards.exact_match``), with their public members;
- the pages' own fenced blocks (index, cheat sheet, FAQ, ...), among them
  each guide's and example's whole source (``--8<-- "guides/3_programs.py:494"``,
  reported as "sources").

A block is measured when it is *self-contained* (every name it reads is
bound in the block, a builtin, or ``synalinks``, which is imported for it as
the guides assume) and *in scope* (every synalinks name it uses comes from a
measured area, :mod:`scope`). Fragments that continue an earlier block
(``history = await program.fit(...)``) are counted apart as fragments.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

from public_api import PublicApi
from scope import IN, classify, source_path

FENCE = re.compile(r"```python[^\n]*\n(.*?)```", re.S)
SNIPPET = re.compile(r'^\s*--8<-- "([^"]+)"\s*$')
DIRECTIVE = re.compile(r"^::: *(\S+)", re.M)
PRIVATE_MEMBER = re.compile(r"^_[^_]")


@dataclass
class DocBlock:
    page: str                  # "docs/guides/Programs.md"
    kind: str                  # "guides", "code examples", "API reference", "pages"
    index: int                 # position on its page
    code: str
    status: str = "measured"   # "measured", "fragment", "out of scope"
    reason: str = ""
    names: list[str] = field(default_factory=list)

    @property
    def block_id(self) -> str:
        return f"{self.page}#{self.index}"


def _docstrings(node: ast.AST, include_members: bool) -> list[str]:
    texts = []
    docstring = ast.get_docstring(node, clean=True) if isinstance(
        node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if docstring:
        texts.append(docstring)
    if include_members and isinstance(node, (ast.Module, ast.ClassDef)):
        for child in node.body:
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and not PRIVATE_MEMBER.match(child.name):
                texts += _docstrings(child, include_members=True)
    return texts


def _object_docstrings(checkout: Path, dotted: str) -> list[str]:
    """The docstrings mkdocstrings renders for ``::: dotted`` (module, or object inside a module)."""
    parts = dotted.split(".")
    only_module_docstring = parts[0] in ("guides", "examples")
    for split in range(len(parts), 0, -1):
        module_path = checkout.joinpath(*parts[:split])
        for candidate in (module_path.with_suffix(".py"), module_path / "__init__.py"):
            if not candidate.is_file():
                continue
            node: ast.AST = ast.parse(candidate.read_text())
            for name in parts[split:]:
                found = next((child for child in getattr(node, "body", [])
                              if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                              and child.name == name), None)
                if found is None:
                    return []
                node = found
            return _docstrings(node, include_members=not only_module_docstring)
    return []


def _snippet(checkout: Path, code: str) -> str | None:
    """The text a ``--8<-- "file:line"`` or ``--8<-- "file:section"`` include stands for (pymdownx.snippets)."""
    match = SNIPPET.match(code.strip())
    if match is None:
        return None
    path, _, selector = match.group(1).partition(":")
    lines = (checkout / path).read_text().splitlines()
    if selector.isdigit():
        return "\n".join(lines[int(selector) - 1:]) + "\n"
    if selector:
        start = next(i for i, line in enumerate(lines) if f"[start:{selector}]" in line)
        end = next((i for i, line in enumerate(lines) if f"[end:{selector}]" in line), len(lines))
        return "\n".join(lines[start + 1:end]) + "\n"
    return "\n".join(lines) + "\n"


def _page_kind(page: Path, docs: Path) -> str:
    relative = page.relative_to(docs).parts
    if relative[0] == "guides":
        return "guides"
    if relative[0] == "Code Examples":
        return "code examples"
    if relative[0] == "Synalinks API":
        return "API reference"
    return "pages"


def free_names(code: str) -> set[str] | None:
    """Names the block reads but never binds (None if it is not valid Python)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    loads: set[str] = set()
    binds: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else binds).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(node.name)
        elif isinstance(node, ast.arg):
            binds.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            binds.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            binds.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            binds.update(node.names)
    return loads - binds - set(dir(builtins)) - {"synalinks", "__file__", "__name__"}


def synalinks_names(code: str) -> list[str]:
    """Public paths the block uses: ``synalinks.rewards.ExactMatch``, ``from synalinks import ops``..."""
    tree = ast.parse(code)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts = []
            current: ast.AST = node
            while isinstance(current, ast.Attribute):
                parts.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id == "synalinks":
                found.add(".".join(["synalinks", *reversed(parts)]))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "synalinks":
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    # keep only the longest chains (synalinks.rewards.ExactMatch, not synalinks.rewards)
    return sorted(name for name in found if not any(other.startswith(name + ".") for other in found))


def _scope_of(names: list[str], api: PublicApi) -> tuple[str, str]:
    for name in names:
        parts = name.split(".")
        export = None
        for end in range(len(parts), 1, -1):
            export = api.by_public.get(".".join(parts[:end]))
            if export is not None:
                break
        if export is None:
            continue  # a submodule, or a name synalinks doesn't export: measured (it is what the block uses)
        kind, reason = classify(source_path(export.module))
        if kind != IN:
            return ("out of scope", f"{reason} ({name})")
    return ("measured", "")


def collect_blocks(checkout: Path, api: PublicApi | None = None) -> list[DocBlock]:
    """Every Python block of the docs site, classified."""
    api = api or PublicApi(checkout)
    docs = checkout / "docs"
    blocks: list[DocBlock] = []
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text()
        codes = FENCE.findall(text)
        for directive in DIRECTIVE.findall(text):
            for docstring in _object_docstrings(checkout, directive):
                codes += FENCE.findall(docstring)
        for index, code in enumerate(codes):
            included = _snippet(checkout, code)
            kind = "sources" if included is not None else _page_kind(page, docs)
            block = DocBlock(str(page.relative_to(checkout)), kind, index, included if included is not None else code)
            code = block.code
            free = free_names(code)
            if free is None:
                block.status, block.reason = "fragment", "not valid Python on its own"
            elif free:
                block.status, block.reason = "fragment", "continues another block: " + ", ".join(sorted(free)[:4])
            else:
                block.names = synalinks_names(code)
                block.status, block.reason = _scope_of(block.names, api)
            blocks.append(block)
    return blocks
