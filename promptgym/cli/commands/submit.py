"""``promptgym submit``: send a whole run to a Ray cluster as a job, and follow its log.

    promptgym submit --config run.toml --address http://127.0.0.1:8265 --env-file .env

The job's working directory holds the resolved config, the data files it names and what
``--include`` adds; never a secret. The env file's values (and the keys the config names with
``api_key_env``) travel as the job's environment variables, and are masked in every output.
The run id is the job's submission id; ``promptgym runs list|show|stop`` follow it.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Optional

import typer

from promptgym.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, console, fail, secret_env_names, secret_masker
from promptgym.cli.config import PATH_KEYS, ConfigError, JobConfig, load_config, resolved_dict
from promptgym.runs.folder import RunFolder, default_runs_dir, new_run_id
from promptgym.cli.secrets import Masker, env_file_values
from promptgym.distributed.jobs import JobsAPIError, RayJobs

CONFIG_NAME = "config.toml"
FILES_DIR = "files"
EXIT_CODES = {"completed": 0, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}


class SubmitError(ValueError):
    """A run that can't be sent as it is; the message says what to change."""


def _unique_name(folder: Path, name: str) -> str:
    candidate, number = name, 1
    while (folder / candidate).exists():
        number += 1
        candidate = f"{Path(name).stem}_{number}{Path(name).suffix}"
    return candidate


def is_env_file(path: Path) -> bool:
    return path.name == ".env" or path.name.endswith(".env") or path.name.startswith(".env.")


def stage_working_dir(config: JobConfig, target: Path, include: Iterable[str | Path] = (),
                      secrets: Masker | None = None) -> Path:
    """Write the job's working directory into ``target``: ``config.toml``, ``files/`` and ``include``.

    Files the config names (data, a saved program) are copied into ``files/`` and the config points
    at them by relative path. Raises :class:`SubmitError` when a path is missing, when an included
    path is an env file, or when a staged file contains a secret value.
    """
    import tomli_w

    target.mkdir(parents=True, exist_ok=True)
    raw = resolved_dict(config)
    for section, key in PATH_KEYS:
        value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
        if not value:
            continue
        source = Path(value)
        if not source.is_file():
            raise SubmitError(f"{section}.{key}: {source} is not a file")
        (target / FILES_DIR).mkdir(exist_ok=True)
        name = _unique_name(target / FILES_DIR, source.name)
        shutil.copy2(source, target / FILES_DIR / name)
        raw[section][key] = f"{FILES_DIR}/{name}"
    for item in include:
        source = Path(item)
        if not source.exists():
            raise SubmitError(f"--include {item}: no such file or folder")
        if is_env_file(source):
            raise SubmitError(f"--include {item}: env files never go into the job's files (use --env-file)")
        destination = target / source.name
        if destination.exists():
            raise SubmitError(f"--include {item}: {source.name} is already in the job's files")
        if source.is_dir():
            shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".env*", "*.env"))
        else:
            shutil.copy2(source, destination)
    (target / CONFIG_NAME).write_text(tomli_w.dumps(raw), encoding="utf-8")
    if secrets is not None:
        check_no_secrets(target, secrets)
    return target


def check_no_secrets(folder: Path, secrets: Masker) -> None:
    """Raise :class:`SubmitError` naming the first file under ``folder`` that holds a secret value."""
    values = [value.encode() for value in secrets.secrets]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        content = path.read_bytes()
        if any(value in content for value in values):
            raise SubmitError(f"{path.relative_to(folder)} contains a secret value; secrets travel only as "
                              "environment variables (--env-file, or the variable api_key_env names)")


def entrypoint_command(run_id: str, python: str = "python", runs_dir: str = "runs",
                       extra_args: Iterable[str] = ()) -> str:
    """The job's shell command: ``promptgym train`` on the staged config, unattended, as run ``run_id``."""
    return shlex.join([python, "-m", "promptgym.cli.main", "train", "--config", CONFIG_NAME, "--yes",
                       "--run-id", run_id, "--runs-dir", runs_dir, *extra_args])


def job_secrets(config: JobConfig, env_file: Optional[str]) -> dict[str, str]:
    """The job's secret variables: everything in the env file, and the keys the config names if set here."""
    secrets = env_file_values(env_file) if env_file else {}
    for name in secret_env_names(config):
        if name not in secrets and os.environ.get(name):
            secrets[name] = os.environ[name]
    return secrets


class LineMasker:
    """Masks a stream of log chunks line by line, so that no secret is split across two chunks."""

    def __init__(self, masker: Masker) -> None:
        self.masker, self.pending = masker, ""

    def feed(self, chunk: str) -> str:
        complete, newline, self.pending = (self.pending + chunk).rpartition("\n")
        return self.masker.mask(complete + newline)

    def flush(self) -> str:
        text, self.pending = self.pending, ""
        return self.masker.mask(text)


async def stream_logs(jobs, run_id: str, masker: Masker) -> None:
    lines = LineMasker(masker)
    async for chunk in jobs.follow_logs(run_id):
        console.out(lines.feed(chunk), end="", highlight=False)
    console.out(lines.flush(), end="", highlight=False)


def follow_job(jobs, run: RunFolder, masker: Masker) -> str:
    """Stream the job's log until it ends; record and return its final status (ours)."""
    try:
        asyncio.run(stream_logs(jobs, run.id, masker))
    except KeyboardInterrupt:
        console.print(f"stopped following; the job goes on. See it with: promptgym runs show {run.id}; "
                      f"stop it with: promptgym runs stop {run.id}", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED)
    status = jobs.status(run.id)
    run.update_status(status=status)
    return status


def submit(
    config: list[str] = typer.Option(..., "--config", "-c", help="TOML config (repeatable; later files win)."),
    address: str = typer.Option("http://127.0.0.1:8265", "--address", envvar="RAY_API_SERVER_ADDRESS",
                                help="The cluster's dashboard (Jobs API) address."),
    env_file: Optional[str] = typer.Option(None, "--env-file", help="Secrets, sent as the Ray job's env vars only."),
    include: list[str] = typer.Option([], "--include", help="A file or folder to add to the Ray job's files (repeatable)."),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Override data with a built-in dataset."),
    examples: Optional[int] = typer.Option(None, "--examples", min=1, help="Use only N training examples."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Override job.seed."),
    python: str = typer.Option("python", "--python", help="The cluster's interpreter that has promptgym."),
    remote_runs_dir: str = typer.Option("runs", "--remote-runs-dir", help="Where the Ray job writes its run folder."),
    entrypoint_cpus: Optional[float] = typer.Option(None, "--entrypoint-cpus", help="CPUs reserved for the driver."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Run the rollouts on N Ray workers of the cluster."),
    poll: bool = typer.Option(True, "--poll/--no-poll", help="Stream the Ray job's log, or submit and print the run id."),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", help="Where the local record goes (default ./runs)."),
) -> None:
    """Send a run to a Ray cluster as a Ray job (Ray Jobs API) and stream its log."""
    masker = secret_masker(env_file)
    try:
        job_config = load_config(config, {"model": model, "dataset": dataset, "examples": examples, "seed": seed})
    except ConfigError as error:
        fail(masker.mask(str(error)))
    secrets = job_secrets(job_config, env_file)
    for value in secrets.values():
        masker.add(value)
    run_id = new_run_id(job_config.job.name)
    if workers is not None and workers < 1:
        fail(f"--workers: expected a number >= 1, got {workers}")
    extra = ["--executor", "ray", "--workers", str(workers)] if workers else []
    entrypoint = entrypoint_command(run_id, python, remote_runs_dir, extra)
    # The record exists before the job does: a job writing to this same runs dir takes it over.
    run = RunFolder.create(runs_dir or default_runs_dir(), job_config.job.name, run_id=run_id)
    run.update_status(status="submitted", submitted_as="ray_job", ray_address=address, entrypoint=entrypoint,
                      env_file=str(Path(env_file).resolve()) if env_file else None, config_files=config,
                      secret_env=sorted(secrets))
    with tempfile.TemporaryDirectory(prefix="promptgym-job-") as staging:
        try:
            stage_working_dir(job_config, Path(staging), include, masker)
            jobs = RayJobs(address)
            jobs.submit(run_id, entrypoint, Path(staging), secrets, metadata={"name": job_config.job.name},
                        entrypoint_num_cpus=entrypoint_cpus)
        except Exception as error:
            shutil.rmtree(run.path, ignore_errors=True)
            if isinstance(error, (SubmitError, JobsAPIError)):
                fail(masker.mask(str(error)))
            fail(masker.mask(f"submitting to {address} failed: {type(error).__name__}: {error}"), EXIT_FAILED)
    console.print(f"submitted run {run_id} to {address} ({len(secrets)} secret env var(s): "
                  f"{', '.join(sorted(secrets)) or 'none'})", markup=False, soft_wrap=True)
    if not poll:
        console.print(f"follow it with: promptgym runs show {run_id}", markup=False)
        return
    status = follow_job(jobs, run, masker)
    console.print(f"run {run_id}: {status}", markup=False)
    raise typer.Exit(EXIT_CODES.get(status, EXIT_FAILED))
