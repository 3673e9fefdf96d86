"""``promptgym train``: TOML config -> the library's objects -> ``fit()``, with run folders and live progress.

See docs/cli.md. The pieces: ``main`` (the typer app), ``commands/`` (one command per file), ``flows/`` (one
file per job type, SFT and RL whole, and the one table keyed by job type), ``launch`` (train, resume, worker and
run-with-renderer, written once), ``config`` (pydantic schema), ``build`` (config -> objects), ``runner`` (the
prompt-learning flow's run: baseline, fit, evaluation), ``artifacts`` (summary.md, plots), ``render`` (live
output), ``execution`` (``--executor``: where a run executes). The run engine the flows drive (run folder,
status, events, history, checkpoints, stop requests, sessions, loggers) is :mod:`promptgym.runs`.
"""
