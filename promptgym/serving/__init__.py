"""``promptgym.serving``: trained programs behind HTTP (OpenAI-compatible) and MCP.

    from promptgym.serving import create_app, load_programs
    app = create_app(load_programs(["qa.json"]))

``promptgym serve qa.json`` runs it with uvicorn on 127.0.0.1; see docs/serving.md.
"""

from promptgym.serving.app import create_app
from promptgym.serving.programs import ServedProgram, load_programs, share_language_models
from promptgym.serving.context import ServeSettings

__all__ = ["ServeSettings", "ServedProgram", "create_app", "load_programs", "share_language_models"]
