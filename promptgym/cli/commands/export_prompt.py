"""``promptgym export-prompt``: a trained program's exact prompts for another stack, checked on labelled data.

    promptgym export-prompt best_program.json --format openai-json -o prompt.json
    promptgym export-prompt --run RUN_ID --format jinja -o prompt.jinja
    promptgym export-prompt best_program.json --check test.jsonl --limit 100
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from promptgym.cli.common import console, fail
from promptgym.runs.folder import RunFolder, default_runs_dir
from promptgym.core.atomic import atomic_write_text
from promptgym.core.local_server import LocalServer
from promptgym.export import FORMATS, check_export, export_prompts, render
from promptgym.export.check import http_caller
from promptgym.lm.language_model import LanguageModel
from promptgym.programs.program import Program
from promptgym.programs.walk import iter_modules


def export_prompt_command(
    program_file: Optional[Path] = typer.Argument(None, metavar="PROGRAM.json", help="A saved program."),
    run_id: Optional[str] = typer.Option(None, "--run", metavar="RUN_ID", help="A run's best program instead."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where run folders are (default ./runs)."),
    format: str = typer.Option("messages", "--format", "-f", help="messages, openai-json or jinja."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write here (default: print)."),
    check: Optional[Path] = typer.Option(None, "--check", metavar="DATA.jsonl",
                                         help="Score the exported prompt next to the program on these labelled rows."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Check only the first N rows."),
    api_base: Optional[str] = typer.Option(None, "--api-base", help="The OpenAI-compatible server the check calls "
                                           "(default: the program's; an embedded model is served in-process)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="NAME",
                                              help="Environment variable with that server's key."),
    report_file: Optional[Path] = typer.Option(None, "--report", help="Also write the check's numbers as JSON."),
) -> None:
    """Write each Generator's exact messages (system text, demonstrations, the input slot)."""
    if format not in FORMATS:
        fail(f"--format: expected one of {', '.join(FORMATS)}, got {format!r}")
    path = program_path(program_file, run_id, runs_dir)
    try:
        program = Program.load(str(path))
        exports = export_prompts(program)
    except (ValueError, KeyError, TypeError) as error:
        fail(f"{path}: {error}")
    text = render(exports, format, program.name)
    if output is not None:
        atomic_write_text(output, text)
        console.print(f"wrote {output} ({len(exports)} Generator{'s' if len(exports) != 1 else ''})")
    elif check is None:
        typer.echo(text, nl=False)
    for item in exports:
        for note in item.notes:
            console.print(f"note: {item.generator}: {note}", style="yellow", soft_wrap=True)
    if check is not None:
        x, y = read_labelled(check, program, limit)
        report = asyncio.run(run_check(program, exports[0], x, y, api_base, api_key_env))
        console.print(str(report), markup=False, soft_wrap=True)
        if report_file is not None:
            atomic_write_text(report_file, json.dumps({"program": str(path), "data": str(check), **report.as_dict()},
                                                      indent=2) + "\n")


def program_path(program_file: Optional[Path], run_id: Optional[str], runs_dir: Optional[Path]) -> Path:
    if (program_file is None) == (run_id is None):
        fail("give a PROGRAM.json or --run RUN_ID")
    if run_id is not None:
        try:
            program_file = RunFolder.open(runs_dir or default_runs_dir(), run_id).path / "best_program.json"
        except FileNotFoundError as error:
            fail(str(error))
    assert program_file is not None
    if not program_file.is_file():
        fail(f"{program_file}: no such program file")
    return program_file


def read_labelled(path: Path, program: Program, limit: Optional[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Inputs and labels from JSONL rows holding the program's input and output fields."""
    inputs = list((program.input_schema.get("properties") or {}))
    outputs = [name for name in (program.output_schema.get("properties") or {}) if name != "thinking"]
    required = set(program.input_schema.get("required") or inputs)
    x, y = [], []
    if not path.is_file():
        fail(f"--check {path}: no such file")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                fail(f"{path}:{number}: not JSON ({error.msg})")
            if not isinstance(row, dict):
                fail(f"{path}:{number}: expected a JSON object with the fields {', '.join(inputs + outputs)}")
            missing = [name for name in [*required, *outputs] if name not in row]
            if missing:
                fail(f"{path}:{number}: missing field(s) {', '.join(missing)} (inputs: {', '.join(inputs)}; "
                     f"labels: {', '.join(outputs)})")
            x.append({name: row[name] for name in inputs if name in row})
            y.append({name: row[name] for name in outputs})
            if limit and len(x) >= limit:
                break
    if not x:
        fail(f"--check {path}: no rows")
    return x, y


async def run_check(program: Program, exported: Any, x: list[dict[str, Any]], y: list[dict[str, Any]],
                    api_base: Optional[str], api_key_env: Optional[str]) -> Any:
    """The check, against ``api_base`` or the program's server; an embedded model is served in-process."""
    from promptgym.serving import create_app  # deferred: FastAPI loads only when an embedded model is checked

    for module in iter_modules(program):  # both sides ask the model: no answer comes from the response cache
        if isinstance(getattr(module, "language_model", None), LanguageModel):
            module.language_model.cache = False
    model = next(module.language_model for module in iter_modules(program) if module.name == exported.generator)
    key = os.environ.get(api_key_env) if api_key_env else None
    if api_base is None and model.model_string.provider == "local":
        direct = LanguageModel(model=model.model, n_ctx=model.n_ctx, cache=False)
        app = create_app([], models=[direct])
        async with LocalServer(app) as url:  # on 127.0.0.1, for as long as the check runs
            return await check_export(program, x, y, http_caller(f"{url}/v1", timeout=600), model=model.model)
    base = api_base or model.api_base
    return await check_export(program, x, y, http_caller(base, key or model.api_key or os.environ.get("OPENAI_API_KEY")),
                              model=None if api_base is None else model.model_string.name)
