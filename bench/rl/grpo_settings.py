"""The GRPO settings every RL benchmark script takes, with one set of defaults.

``vs_trl.py`` forwards them to both trainers (``train_promptgym.py`` and
``train_trl.py``, which runs in TRL's own environment: this module imports
nothing but the standard library), so the two always train alike::

    parser = add_grpo_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--iterations", "3"])
    grpo_argv(args)[:2]          # ['--iterations', '3']
"""

from __future__ import annotations

import argparse

GRPO_SETTINGS: dict[str, tuple[type, float]] = {
    "iterations": (int, 10), "group_size": (int, 4), "batch_size": (int, 4), "max_new_tokens": (int, 16),
    "temperature": (float, 0.8), "learning_rate": (float, 3e-4),
}
"""Setting -> (its type, its default)."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_grpo_arguments(parser: argparse.ArgumentParser, **defaults: float) -> argparse.ArgumentParser:
    """``--iterations``, ``--group-size``... on ``parser``; ``defaults`` overrides some (``iterations=30``)."""
    unknown = set(defaults) - set(GRPO_SETTINGS)
    if unknown:
        raise ValueError(f"not GRPO settings: {sorted(unknown)}; known: {sorted(GRPO_SETTINGS)}")
    for name, (kind, default) in GRPO_SETTINGS.items():
        parser.add_argument(_flag(name), type=kind, default=defaults.get(name, default))
    return parser


def grpo_argv(args: argparse.Namespace) -> list[str]:
    """The settings in ``args`` as command-line arguments, for a trainer run as a subprocess."""
    return [item for name in GRPO_SETTINGS for item in (_flag(name), str(getattr(args, name)))]
