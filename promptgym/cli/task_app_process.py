"""``data.task_app``: the CLI starts the app file for the run and stops it at the end, however the run ends.

    with running_task_app(config, masker, runs_dir) as effective:
        effective.data.task_url          # http://127.0.0.1:<free port> while the block runs

The app gets the run's key in the variable ``data.task_api_key_env`` names: the value already in the
environment (an ``--env-file``), or else a random one made for this run, so a started app is never open.
The config saved in the run folder keeps ``task_app`` (not the port), so ``--resume`` starts the app again.
Its output goes to ``<runs dir>/.task_apps/<name>-<time>.log``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import Iterator

from promptgym.cli.common import console
from promptgym.cli.config import ConfigError, JobConfig
from promptgym.cli.secrets import Masker
from promptgym.taskapp.launch import TaskAppLaunchError, launch_task_app


def with_task_url(config: JobConfig, url: str) -> JobConfig:
    """A copy of ``config`` that names the running app by URL (what the rest of the CLI reads)."""
    assert config.data is not None
    return config.model_copy(update={"data": config.data.model_copy(update={"task_url": url, "task_app": None})})


@contextlib.contextmanager
def running_task_app(config: JobConfig, masker: Masker, runs_dir: Path) -> Iterator[JobConfig]:
    """Start ``config.data.task_app`` (if set) for the block; yields the config with its URL."""
    data = config.data
    if data is None or data.task_app is None:
        yield config
        return
    name = data.task_api_key_env
    previous = os.environ.get(name)
    key = previous or secrets.token_urlsafe(24)
    masker.add(key)
    path = Path(data.task_app)
    log = runs_dir / ".task_apps" / f"{path.stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        app = launch_task_app(path, env={**os.environ, name: key}, log=log)
    except TaskAppLaunchError as error:
        raise ConfigError(f"data.task_app: {masker.mask(str(error))}") from None
    os.environ[name] = key
    console.print(f"task app {path.name} started on {app.url} (pid {app.pid}, log {log})", soft_wrap=True)
    try:
        yield with_task_url(config, app.url)
    finally:
        exited = app.process.poll()
        if exited is not None:  # the calls to it failed as connection errors: say why
            console.print(f"error: task app {path.name} exited with code {exited} during the run (pid {app.pid}); "
                          f"its log: {log}", markup=False, soft_wrap=True)
        app.stop()
        if previous is None:
            os.environ.pop(name, None)
        console.print(f"task app {path.name} stopped (pid {app.pid})")
