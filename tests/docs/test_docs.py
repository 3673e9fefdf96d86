"""Every fenced block of the README and docs/ runs, or is checked, here (a failure names the file and line).

Python blocks run against scripted models (tests/docs/context.py), a page's blocks in order in one
namespace; shell blocks are checked command by command (tests/docs/shell.py); TOML blocks load with
the real config loader; JSON blocks parse. A block that cannot run here says why in its fence:
```` ```python no-run: trains a real model ````, and is still compiled.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import logging
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from promptgym.cli.config import absolute_paths, read_toml, validate_config
from promptgym.cli.flows import DEFAULT_JOB_TYPE, FLOWS, job_types
from tests.docs.blocks import LANGUAGES, ROOT, Block, all_blocks, read_blocks
from tests.docs.context import new_namespace, patch_models, write_files
from tests.docs.shell import check_shell_block

BLOCKS = all_blocks()
MAX_NO_RUN = 16
"""The blocks that only compile (a GPU, a Ray cluster, a real training run, an outside server): keep it short."""


def of(language: str, *more: str) -> list[Any]:
    return [pytest.param(block, id=block.where) for block in BLOCKS if block.language in (language, *more)]


@dataclass
class Page:
    """A page's Python namespace, its folder and event loop, and which of its blocks ran."""

    folder: Path
    loop: asyncio.AbstractEventLoop
    namespace: dict[str, Any]
    ran: dict[int, BaseException | None] = field(default_factory=dict)


PAGES: dict[Path, Page] = {}


@pytest.fixture(scope="module")
def scripted() -> Iterator[list[Any]]:
    servers: list[Any] = []
    flows, modules = dict(FLOWS), set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        patch_models(patch, servers)
        yield servers
    FLOWS.clear()
    FLOWS.update(flows)  # a page's block may add a job type (docs/writing_a_flow.md)
    for name in set(sys.modules) - modules:
        if getattr(sys.modules[name], "__file__", None) and any(
                str(page.folder) in str(sys.modules[name].__file__) for page in PAGES.values()):
            del sys.modules[name]
    for page in PAGES.values():
        page.loop.close()
    PAGES.clear()


def page_of(path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Page:
    if path not in PAGES:
        folder = tmp_path_factory.mktemp(path.stem)
        write_files(folder)
        monkeypatch.chdir(folder)
        loop = asyncio.new_event_loop()
        PAGES[path] = Page(folder, loop, new_namespace(loop))
    monkeypatch.chdir(PAGES[path].folder)
    monkeypatch.syspath_prepend(str(PAGES[path].folder))  # the modules a page writes (file=NAME) import from there
    return PAGES[path]


def compiled(block: Block) -> Any:
    """The block's code, its line numbers those of the page (a traceback names ``docs/page.md``, line N)."""
    name = str(block.path.relative_to(ROOT))
    tree = compile(block.code, name, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return compile(ast.increment_lineno(tree, block.line), name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def run_python(page: Page, block: Block) -> None:
    """Runs ``block`` after the page's earlier blocks (once each), as a reader pasting them in order would."""
    for earlier in read_blocks(block.path):
        if earlier.line > block.line:
            break
        if earlier.language != "python" or earlier.no_run_reason is not None or earlier.line in page.ran:
            continue
        if earlier.file is not None:
            (page.folder / earlier.file).write_text(earlier.code, encoding="utf-8")
            importlib.invalidate_caches()
        try:
            result = eval(compiled(earlier), page.namespace)  # a coroutine when the block awaits at top level
            if asyncio.iscoroutine(result):
                page.loop.run_until_complete(result)
            page.ran[earlier.line] = None
        except BaseException as error:  # noqa: BLE001 - kept to name the block that broke the page
            page.ran[earlier.line] = error
        if earlier.line != block.line and page.ran[earlier.line] is not None:
            raise AssertionError(f"{earlier.where} (an earlier block of the page) failed: "
                                 f"{page.ran[earlier.line]!r}") from page.ran[earlier.line]
    error = page.ran[block.line]
    if error is not None:
        raise error


def test_every_fence_names_its_language_and_every_no_run_says_why() -> None:
    unnamed = [block.where for block in BLOCKS if block.language not in LANGUAGES]
    assert not unnamed, f"fences without a known language ({sorted(LANGUAGES)}; text for output): {unnamed}"
    no_run = [block for block in BLOCKS if block.no_run_reason is not None]
    assert all(block.no_run_reason for block in no_run), [block.where for block in no_run if not block.no_run_reason]
    assert len(no_run) <= MAX_NO_RUN, [f"{block.where}: {block.no_run_reason}" for block in no_run]


@pytest.mark.parametrize("block", of("python"))
def test_python_block(block: Block, scripted: list[Any], tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    code = compiled(block)  # a no-run block still compiles
    if block.no_run_reason is not None:
        assert code.co_filename == str(block.path.relative_to(ROOT))
        return
    with caplog.at_level(logging.WARNING, logger="promptgym"):
        run_python(page_of(block.path, tmp_path_factory, monkeypatch), block)
    # A failed example is logged, not raised: a block whose program failed on every input would still "run".
    failures = [record.getMessage() for record in caplog.records if " failed: " in record.getMessage()]
    assert not failures, f"{block.where}: the block ran, but its program failed: {failures[:3]}"


@pytest.mark.parametrize("block", of("sh", "bash"))
def test_shell_block(block: Block) -> None:
    if block.no_run_reason is None:
        assert check_shell_block(block) > 0, f"{block.where}: no command in the block"


def run_page_python(block: Block, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's Python blocks, first: one may add the job type a TOML block names (``[job] type = "count"``)."""
    python = [earlier for earlier in read_blocks(block.path) if earlier.language == "python" and earlier.no_run_reason is None]
    if python:
        run_python(page_of(block.path, tmp_path_factory, monkeypatch), python[-1])


BASES = {"prompt_learning": "dates_fewshot.toml", "sft": "sft_dates.toml", "rl": "rl_acronyms.toml"}


@pytest.mark.parametrize("block", of("toml"))
def test_toml_block(block: Block, scripted: list[Any], tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The block, as the sections of a config in examples/configs/ (the rest from the example of its job type)."""
    text = tomllib.loads(block.code)
    job_type = text.get("job", {}).get("type") or next((kind for kind in ("sft", "rl") if kind in text), DEFAULT_JOB_TYPE)
    run_page_python(block, tmp_path_factory, monkeypatch)
    assert job_type in job_types(), f"{block.where}: job type {job_type!r} is neither built in nor added by the page"
    folder = ROOT / "examples" / "configs"
    base = absolute_paths(read_toml(folder / BASES[job_type]), folder) if job_type in BASES else {}
    monkeypatch.chdir(tmp_path_factory.mktemp("toml"))
    for name in ("served.json",):  # the files a fragment's [program] names, as its page describes them
        Path(name).write_text("{}")
    raw = {**base, **absolute_paths(text, Path.cwd())}  # a block's section replaces the example's
    validate_config(raw, block.where)


@pytest.mark.parametrize("block", of("json"))
def test_json_block(block: Block) -> None:
    try:
        json.loads(block.code)
    except json.JSONDecodeError:  # JSON Lines: one object per line
        for number, line in enumerate(block.code.splitlines(), start=block.line + 1):
            if line.strip():
                try:
                    json.loads(line)
                except json.JSONDecodeError as error:
                    raise AssertionError(f"{block.path.name}:{number}: not JSON: {error}") from None
