"""``promptgym.export``: a trained program's exact prompts as files other stacks can use, and a check.

    exports = export_prompts(program)            # one ExportedPrompt per Generator
    render(exports, "openai-json", program.name) # a chat-completions body with the {{input_json}} slot
    report = await check_export(program, x, y, caller)   # exported-prompt accuracy next to the program's

``promptgym export-prompt PROGRAM.json --format messages|jinja|openai-json [--check data.jsonl]``;
see docs/serving.md.
"""

from promptgym.export.check import CheckReport, check_export
from promptgym.export.formats import FORMATS, render
from promptgym.export.prompts import INPUT_SLOT, ExportedPrompt, export_prompts

__all__ = ["FORMATS", "INPUT_SLOT", "CheckReport", "ExportedPrompt", "check_export", "export_prompts", "render"]
