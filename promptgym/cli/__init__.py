"""``promptgym train``: TOML config -> the library's objects -> ``fit()``, with run folders and live progress.

See docs/cli.md. The pieces: ``config`` (pydantic schema), ``build`` (config -> objects),
``runner`` (fit with checkpoints, resume), ``recorder`` (events.jsonl), ``artifacts`` (summary.md, plots),
``render`` (live output), ``main`` (the typer app).
"""
