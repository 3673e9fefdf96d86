"""Runs sent to a Ray cluster as jobs (Ray Jobs API), in our vocabulary.

    jobs = RayJobs("http://127.0.0.1:8265")
    jobs.submit(run_id, "python -m promptgym.cli.main train ...", Path("staged"), secret_env={"API_KEY": "..."})
    jobs.status(run_id)           # "running", "completed", ... (ours, mapped from Ray's)

Secrets travel as the job's environment variables only, with the list of their names
(``PROMPTGYM_SECRET_ENV_NAMES``) so that the job masks them in everything it writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator, Mapping

# The names of the job's secret variables, so the job masks their values in all it writes.
SECRET_NAMES_ENV = "PROMPTGYM_SECRET_ENV_NAMES"

RUN_ID_KEY = "promptgym_run_id"

# Ray's job states on our run states (runs list / show read them the same way as local runs).
RAY_TO_RUN_STATUS = {
    "PENDING": "starting",
    "RUNNING": "running",
    "STOPPED": "interrupted",
    "SUCCEEDED": "completed",
    "FAILED": "failed",
}


class JobsAPIError(RuntimeError):
    """The cluster's Jobs API can't be reached or refused a request."""


def run_status_of(ray_status: Any) -> str:
    """Our status for a Ray ``JobStatus`` (or its name)."""
    name = str(getattr(ray_status, "value", ray_status)).upper()
    return RAY_TO_RUN_STATUS.get(name, name.lower())


def job_environment(secret_env: Mapping[str, str]) -> dict[str, str]:
    """The job's environment variables: the secrets, and the list of their names (so the job masks them)."""
    env = dict(secret_env)
    env[SECRET_NAMES_ENV] = ",".join(sorted(secret_env))
    return env


class RayJobs:
    """The Jobs API of one cluster (its dashboard address), in our vocabulary."""

    def __init__(self, address: str) -> None:
        from ray.job_submission import JobSubmissionClient

        self.address = address
        try:
            self.client = JobSubmissionClient(address)
        except Exception as error:  # noqa: BLE001 - connection errors come in many types; say where
            raise JobsAPIError(f"can't reach the Ray Jobs API at {address}: {error}") from None

    def submit(self, run_id: str, entrypoint: str, working_dir: Path, secret_env: Mapping[str, str],
               metadata: Mapping[str, str] | None = None, entrypoint_num_cpus: float | None = None) -> str:
        runtime_env = {"working_dir": str(working_dir), "env_vars": job_environment(secret_env)}
        return self.client.submit_job(
            entrypoint=entrypoint, submission_id=run_id, runtime_env=runtime_env,
            metadata={RUN_ID_KEY: run_id, **(metadata or {})}, entrypoint_num_cpus=entrypoint_num_cpus,
        )

    def status(self, run_id: str) -> str:
        return run_status_of(self.client.get_job_status(run_id))

    def details(self, run_id: str) -> dict[str, Any]:
        """What ``runs show`` prints: status (ours and Ray's), message, times, entrypoint; never env values."""
        info = self.client.get_job_info(run_id)
        env_names = sorted(set(((info.runtime_env or {}).get("env_vars") or {})) - {SECRET_NAMES_ENV})
        return {
            "status": run_status_of(info.status), "ray_status": str(getattr(info.status, "value", info.status)),
            "message": (info.message or "").split("\n", 1)[0], "entrypoint": info.entrypoint, "start_time": info.start_time,
            "end_time": info.end_time, "env_vars": env_names, "metadata": dict(info.metadata or {}),
        }

    def jobs(self) -> list[dict[str, Any]]:
        """The cluster's jobs that are promptgym runs, newest first."""
        found = []
        for info in self.client.list_jobs():
            run_id = (info.metadata or {}).get(RUN_ID_KEY)
            if run_id:
                found.append({"id": run_id, "status": run_status_of(info.status), "start_time": info.start_time,
                              "end_time": info.end_time, "message": info.message})
        return sorted(found, key=lambda job: job["start_time"] or 0, reverse=True)

    def logs(self, run_id: str) -> str:
        return self.client.get_job_logs(run_id)

    def follow_logs(self, run_id: str) -> AsyncIterator[str]:
        """Chunks of the job's log as they come, until the job ends."""
        return self.client.tail_job_logs(run_id)

    def stop(self, run_id: str) -> bool:
        return bool(self.client.stop_job(run_id))
