"""``promptgym train``: TOML config -> the library's objects -> ``fit()``, with run folders and live progress.

See docs/cli.md. The pieces: ``main`` (the typer app), ``commands/`` (one command per file), ``flows/`` (one
flow per job type, and the one table keyed by job type), ``launch`` (train, resume, worker and
run-with-renderer, written once), ``session`` (one run session: status, signals, how it ended), ``config``
(pydantic schema), ``build`` (config -> objects), ``runner`` (a prompt-learning run: fit with checkpoints,
resume), ``sft_runner`` / ``rl_runner`` (the weight runs), ``recorder`` (events.jsonl), ``artifacts``
(summary.md, plots), ``render`` (live output), ``execution`` (``--backend``: where a run executes).
"""
