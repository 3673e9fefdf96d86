"""``promptgym``: train from TOML configs; follow runs. The typer app: each command lives in
:mod:`promptgym.cli.commands`, each job type in :mod:`promptgym.cli.flows`.

    promptgym train --config examples/configs/arithmetic_fewshot.toml --yes
    promptgym train --resume RUN_ID
    promptgym submit --config run.toml --address http://127.0.0.1:8265
    promptgym runs list | show ID | watch ID | stop ID
    promptgym models list
    promptgym kb build docs.db ./docs | add | search docs.db "query" | info docs.db
    promptgym export-sft-data --run RUN_ID -o distilled.jsonl
    promptgym serve best_program.json | --run RUN_ID [--mcp stdio|http]
    promptgym export-prompt best_program.json --format openai-json [--check test.jsonl]
    promptgym ui [--runs DIR] [--traces DIR] [--api-key-env NAME]
    promptgym doctor
"""

from __future__ import annotations

import typer

from promptgym.cli.commands.doctor import doctor_command
from promptgym.cli.commands.export_prompt import export_prompt_command
from promptgym.cli.commands.export_sft_data import export_sft_data_command
from promptgym.cli.commands.kb import kb_app
from promptgym.cli.commands.models import models_app
from promptgym.cli.commands.runs import runs_app
from promptgym.cli.commands.serve import serve_command
from promptgym.cli.commands.submit import submit
from promptgym.cli.commands.train import train, worker
from promptgym.cli.commands.ui import ui_command
from promptgym.cli.common import hide_flag_value_types

hide_flag_value_types()
app = typer.Typer(help="Train LM programs' prompts from TOML configs.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
app.add_typer(runs_app, name="runs")
app.add_typer(models_app, name="models")
app.add_typer(kb_app, name="kb")
app.command("submit")(submit)
app.command("export-sft-data")(export_sft_data_command)
app.command("serve")(serve_command)
app.command("export-prompt")(export_prompt_command)
app.command("doctor")(doctor_command)
app.command("train")(train)
app.command("ui")(ui_command)
app.command("worker", hidden=True)(worker)


def main() -> None:
    """Entry point of the ``promptgym`` script."""
    app()


if __name__ == "__main__":
    main()
