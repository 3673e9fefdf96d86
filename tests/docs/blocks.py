"""The fenced blocks of the docs: where each is, its language, and whether (and why not) it runs."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")
NO_RUN = re.compile(r"\bno-run\b:?\s*(?P<reason>.*)$")
LANGUAGES = {"python", "bash", "sh", "toml", "json", "text"}
"""Every fence names one: ``text`` is output or a diagram (shown, not run); the others are checked."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    info: str  # the whole info string after the language
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def file(self) -> str | None:
        """``file=NAME`` in the fence: the page imports the block as module NAME (it is written there too)."""
        found = re.search(r"\bfile=(\S+)", self.info)
        return found.group(1) if found else None

    @property
    def no_run_reason(self) -> str | None:
        """The reason after ``no-run:`` ('' when the marker gives none), or None when the block runs."""
        found = NO_RUN.search(self.info)
        return found.group("reason").strip() if found else None


def doc_pages() -> list[Path]:
    """The README and every page under docs/ (new pages are picked up as they are added)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, dedented (a block inside a list item is indented)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        info = opening.group("info").strip()
        start, body = index + 1, []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise ValueError(f"{path}:{start}: a fence that is never closed")
        language, _, rest = info.partition(" ")
        blocks.append(Block(path, start, language, rest.strip(), textwrap.dedent("\n".join(body)) + "\n"))
        index += 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for page in doc_pages() for block in read_blocks(page)]
