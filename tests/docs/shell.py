"""Checks a shell block's commands without running what needs a model, a cluster or minutes.

Each command line (continuations joined, comments dropped) is checked by what it starts:

- ``promptgym SUB ...``: ``promptgym SUB --help`` runs, every option the line uses is one of SUB's,
  and a ``--config`` file that exists in the repository loads with the real config loader;
- ``python bench/x.py ...`` (or ``python -m module``): the script exists and defines each option used;
  ``python -c CODE``: every ``from a import b`` in CODE resolves;
- ``bash script.sh``, ``make TARGET``: the script exists, the Makefile has the target;
- ``curl URL``: the path is a route of ``promptgym serve`` and a ``-d`` body is JSON.

``flock LOCK``, ``/usr/bin/time -v``, ``VAR=value`` and ``.venv/bin/`` prefixes are stripped; a ``for ...;
do CMD; done`` loop checks CMD.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
from typing import Any

import typer
from typer.testing import CliRunner

from promptgym.cli.config import load_config
from promptgym.cli.main import app
from tests.docs.blocks import ROOT, Block

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*=")
ROUTE_LITERAL = re.compile(r"\"(/(?:v1|healthz|metrics|mcp|docs)[^\"]*)\"")


def command_lines(code: str) -> list[list[str]]:
    """The words of each command: continuations joined, comments, ``;`` / ``&&`` and loop keywords dropped."""
    commands, lines, pending = [], [], ""
    for raw in re.sub(r"\\\n\s*", " ", code).splitlines():
        pending += raw
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the line goes on
            pending += "\n"
            continue
        lines.append(pending)
        pending = ""
    for line in lines:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split, lexer.commenters = True, "#"
        words: list[str] = []
        for word in [*lexer, ";"]:
            if word in (";", "&&", "||", "|"):
                if words and words[0] == "for":
                    words = []  # the loop header: its body is the next command
                elif words and words[0] == "do":
                    words = words[1:]
                if words and words != ["done"]:
                    commands.append(words)
                words = []
            else:
                words.append(word)
    return commands


def strip_prefixes(words: list[str]) -> list[str]:
    while words:
        if ASSIGNMENT.match(words[0]):
            words = words[1:]
        elif words[0] == "flock":
            words = words[2:]
        elif words[0] == "/usr/bin/time":
            words = words[2:] if len(words) > 1 and words[1] == "-v" else words[1:]
        else:
            break
    if words:
        words = [words[0].removeprefix(".venv/bin/"), *words[1:]]
    return words


def options_of(words: list[str]) -> list[str]:
    """The options a command line passes (``--name`` of ``--name=value``; ``[--x]`` synopsis brackets dropped)."""
    found = []
    for word in words:
        word = word.strip("[]")
        if re.match(r"^--?[A-Za-z]", word):
            found.append(word.split("=", 1)[0])
    return found


@functools.lru_cache(maxsize=1)
def cli_command() -> Any:  # typer's own click Group
    return typer.main.get_command(app)


@functools.lru_cache(maxsize=None)
def cli_help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, f"promptgym {' '.join(path)} --help failed: {result.output}"
    return result.output


def check_promptgym(words: list[str], block: Block) -> None:
    command = cli_command()
    path: list[str] = []
    rest = words[1:]
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        path.append(rest[0])
        command = command.commands[rest[0]]
        rest = rest[1:]
    assert not hasattr(command, "commands") or not rest or rest[0].startswith("-"), \
        f"promptgym {' '.join(path)}: no subcommand {rest[0]!r} (it has {sorted(command.commands)})"
    cli_help(tuple(path))
    known = {name for param in command.params for name in [*param.opts, *param.secondary_opts]} | {"--help"}
    unknown = [option for option in options_of(rest) if option not in known]
    assert not unknown, f"promptgym {' '.join(path)} has no option {unknown} (it has {sorted(known)})"
    for flag in ("--config", "-c"):
        if flag in rest and rest.index(flag) + 1 < len(rest):
            config = ROOT / rest[rest.index(flag) + 1]
            if config.is_file():
                load_config([config])


def check_python(words: list[str]) -> None:
    args = words[1:]
    if args[:1] == ["-c"]:
        for node in ast.walk(ast.parse(args[1])):
            if isinstance(node, ast.ImportFrom):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
        return
    if args[:1] == ["-m"]:
        assert importlib.util.find_spec(args[1]) is not None, f"no module {args[1]}"
        return
    script = ROOT / args[0]
    assert script.is_file(), f"no script {args[0]}"
    sources = "".join(path.read_text(encoding="utf-8") for path in script.parent.glob("*.py"))
    for option in options_of(args[1:]):
        if f'"{option}"' not in sources and f"'{option}'" not in sources:  # built by the script: ask it
            assert option in script_help(args[0]), f"{args[0]} has no option {option}"


@functools.lru_cache(maxsize=None)
def script_help(script: str) -> str:
    done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{script} --help failed: {done.stderr[-500:]}"
    return done.stdout


def check_curl(words: list[str]) -> None:
    urls = [word for word in words if re.match(r"^(https?://|localhost|127\.0\.0\.1)", word)]
    assert urls, f"curl without a URL: {words}"
    path = "/" + urls[0].split("://")[-1].split("/", 1)[1]
    sources = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "promptgym" / "serving").glob("*.py"))
    routes = {re.sub(r"\{[^}]+\}", "[^/]+", route) for route in ROUTE_LITERAL.findall(sources)}
    assert any(re.fullmatch(route, path) for route in routes), f"{path} is not a route of promptgym serve"
    if "-d" in words:
        json.loads(words[words.index("-d") + 1])


def check_make(words: list[str]) -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
    assert set(words[1:]) <= targets, f"the Makefile has no target {set(words[1:]) - targets}"


def check_shell_block(block: Block) -> int:
    """Checks every command of ``block``; returns how many it checked."""
    syntax = subprocess.run(["bash", "-n"], input=block.code, text=True, capture_output=True)
    assert syntax.returncode == 0, f"{block.where}: not valid shell: {syntax.stderr}"
    commands = command_lines(block.code)
    for command in commands:
        line = shlex.join(command)
        words = strip_prefixes(command)
        if not words:
            continue  # an assignment
        program = words[0]
        try:
            if program == "promptgym":
                check_promptgym(words, block)
            elif program in ("python", "python3"):
                check_python(words)
            elif program in ("bash", "sh") or program.endswith(".sh"):
                script = words[1] if program in ("bash", "sh") else program
                assert (ROOT / script).is_file(), f"no script {script}"
            elif program == "curl":
                check_curl(words)
            elif program == "make":
                check_make(words)
            else:
                raise AssertionError(f"no check for the command {program!r}: add one, or mark the block no-run")
        except AssertionError as error:
            raise AssertionError(f"{block.where}: {line}\n  {error}") from None
    return len(commands)

