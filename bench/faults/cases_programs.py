"""Tampered program files: every key removed, every leaf given a wrong type, and a few pointed cases.

The files are loaded in a child process with ``Program.load`` (one process for all of them; each load
reports the exception it raised). A few go through ``promptgym train`` too, where the answer must
be exit 2 naming the file.
"""

from __future__ import annotations

import copy
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from common import PYTHON, RAW_EXCEPTIONS, Case, Verdict, base_env
from configs import config, files

BUILD = """
import asyncio, sys
import promptgym as pg
from factories import Question, Answer

lm = pg.LanguageModel(model="openai/fake", api_base="http://127.0.0.1:9/v1")
program = pg.Sequential([pg.Input(data_model=Question),
                         pg.Generator(data_model=Answer, language_model=lm, name="answerer", instructions="Be brief.")],
                        name="qa")
program.compile(reward="exactmatch", optimizer=pg.optimizers.RandomFewShot(), metrics=["f1_score"])
program.training_setup.optimizer.build(program)
program.save(sys.argv[1])
"""

LOAD_MANY = """
import json, sys
import promptgym as pg
for path in sys.argv[1:]:
    try:
        program = pg.Program.load(path)
        raised, message = None, ""
    except BaseException as error:
        raised, message = type(error).__name__, str(error)[:400]
    print("RESULT " + json.dumps({"path": path, "raised": raised, "message": message}), flush=True)
"""

WRONG = {str: 12345, int: "x", float: "x", bool: "yes", list: {"a": 1}, dict: [1, 2], type(None): {"x": []}}


def walk(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from walk(item, (*path, index))


def edited(data: dict, path: tuple, value: Any = None, delete: bool = False) -> dict:
    copied = copy.deepcopy(data)
    parent = copied
    for part in path[:-1]:
        parent = parent[part]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copied


def label(path: tuple) -> str:
    return ".".join(str(part) for part in path) or "(root)"


def mutations(data: dict) -> Iterator[tuple[str, str, Any]]:
    """(name, expectation, file content): systematic edits ('any': refusing or accepting both fine)."""
    for path, value in walk(data):
        if not path or (path[0] == "optimizer_state" and len(path) > 2):
            continue
        yield f"delete {label(path)}", "any", edited(data, path, delete=True)
        if not isinstance(value, (dict, list)):
            yield f"retype {label(path)}", "any", edited(data, path, WRONG[type(value)])
    variable = ("variables", "answerer/state")
    generator = next(i for i, module in enumerate(data["program"]["config"]["modules"]) if module["class_name"] == "Generator")
    pointed = [
        ("instructions 12345", edited(data, (*variable, "instructions"), 12345)),
        ("instructions null", edited(data, (*variable, "instructions"), None)),
        ("examples a string", edited(data, (*variable, "examples"), "x")),
        ("example without outputs", edited(data, (*variable, "examples"), [{"inputs": {"question": "q"}}])),
        ("max_string_length -5", edited(data, ("program", "config", "modules", generator, "config", "max_string_length"), -5)),
        ("max_tokens -1", edited(data, ("program", "config", "modules", generator, "config", "max_tokens"), -1)),
        ("temperature 'hot'", edited(data, ("program", "config", "modules", generator, "config", "temperature"), "hot")),
        ("language model name ''", edited(data, ("program", "config", "modules", generator, "config", "language_model", "config", "model"), "")),
        ("class_name os.system", edited(data, ("program", "class_name"), "os.system")),
        ("data_model schema garbage", edited(data, ("program", "config", "input"), {"type": 5})),
        ("top level list", [data]),
        ("format missing", edited(data, ("format",), delete=True)),
        ("future version", edited(data, ("version",), 99)),
    ]
    for name, content in pointed:
        yield name, "error", content
    depth = 5000
    deep = ('{"class_name": "Program", "config": {"name": "x", "nodes": [{"module": ' * depth
            + '{"class_name": "Program", "config": {}}' + "}]}}" * depth)
    yield "nested 5000 deep", "error", "RAW:" + json.dumps({**data, "program": "DEEP"}).replace('"DEEP"', deep)
    yield "nested 200000 deep (raw JSON)", "error", "RAW:" + '{"format": "promptgym.program", "program": ' + "[" * 200000 + "]" * 200000 + "}"


def program_file_verdicts() -> list[Verdict]:
    with tempfile.TemporaryDirectory(prefix="pgfault-programs-") as tmp:
        folder = Path(tmp)
        env = base_env(folder)
        good = folder / "good.json"
        subprocess.run([PYTHON, "-c", BUILD, str(good)], cwd=folder, env=env, check=True, capture_output=True, timeout=120)
        data = json.loads(good.read_text())
        cases: dict[str, tuple[str, str]] = {}
        for number, (name, expect, content) in enumerate(mutations(data)):
            path = folder / f"m{number:03d}.json"
            text = content[4:] if isinstance(content, str) and content.startswith("RAW:") else json.dumps(content)
            path.write_text(text)
            cases[str(path)] = (name, expect)
        process = subprocess.run([PYTHON, "-c", LOAD_MANY, *cases], cwd=folder, env=env, capture_output=True,
                                 text=True, timeout=600)
        verdicts = []
        seen = set()
        for line in process.stdout.splitlines():
            if not line.startswith("RESULT "):
                continue
            result = json.loads(line[len("RESULT "):])
            seen.add(result["path"])
            name, expect = cases[result["path"]]
            case = Case("program_file", name, [], expect=expect)
            raised, message = result["raised"], result["message"]
            if raised in RAW_EXCEPTIONS:
                outcome = "traceback"
            elif raised is None:
                outcome = "silent_wrong" if expect == "error" else "ok"
            elif Path(result["path"]).name in message:
                outcome = "clear"
            else:
                outcome = "unclear"
            verdicts.append(Verdict(case, outcome, f"{raised}: {message}" if raised else "loaded", 0.0))
        for path, (name, expect) in cases.items():
            if path not in seen:  # the loader died on it (a crash, not an exception)
                tail = (process.stdout + process.stderr).strip()[-200:]
                verdicts.append(Verdict(Case("program_file", name, [], expect=expect), "traceback", f"loader died: {tail}", 0.0))
        return verdicts


GENERATOR_INDEX = "[i for i, m in enumerate(d['program']['config']['modules']) if m['class_name'] == 'Generator'][0]"


def cli_cases() -> list[Case]:
    """Tampered files through ``promptgym train``: exit 2 naming the file."""
    def tampered(change: str) -> dict[str, str | bytes]:
        return {**files(config(program='[program]\npath = "p.json"\n')), "make.py": BUILD,
                "tamper.py": "import json; d = json.load(open('p.json')); " + change + "; json.dump(d, open('p.json', 'w'))"}

    script = '"$PYTHON" make.py p.json && "$PYTHON" tamper.py && "$PYTHON" -m promptgym.cli.main train -c run.toml --dry-run'
    changes = {
        "cli_program_missing_data_model": f"del d['program']['config']['modules'][{GENERATOR_INDEX}]['config']['data_model']",
        "cli_program_modules_not_list": "d['program']['config']['modules'] = 5",
        "cli_program_instructions_int": "d['variables']['answerer/state']['instructions'] = 12345",
        "cli_program_language_model_missing": f"del d['program']['config']['modules'][{GENERATOR_INDEX}]['config']['language_model']",
    }
    return [Case("program_file", name, ["bash", "-c", script], files=tampered(change), mention=("p.json",))
            for name, change in changes.items()]
