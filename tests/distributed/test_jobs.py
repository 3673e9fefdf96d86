"""`promptgym submit` and `runs list|show|stop` against a Ray head the tests start on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym.cli.main import app
from promptgym.runs.folder import RunFolder
from promptgym.distributed.jobs import RayJobs, run_status_of
from promptgym.distributed.local_head import LocalRayHead, listeners_outside_loopback

runner = CliRunner()
TOKEN = "tok-abcdef123456"                 # a secret-looking name: masked anyway
PLAIN = "plain-value-not-named-like-a-key"  # a name that does not look secret: masked because it is in the env file

JOB_PROGRAM = '''
import hashlib, os
import promptgym as pg
from promptgym.cli.config import ConfigError
from promptgym.testing import ScriptedLanguageModel

class Question(pg.DataModel):
    question: str = pg.Field(description="A question")

class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")

@pg.register_synalinks_serializable()
class FixedLM(ScriptedLanguageModel):  # registered: a Ray worker rebuilds it from the program's JSON
    def __init__(self, delay_s=0.0, **kwargs):
        kwargs.pop("responses", None)
        self.delay_s = delay_s
        super().__init__(respond=lambda request: {"answer": "A"}, delay_s=delay_s, **kwargs)

    def get_config(self):
        return {**super().get_config(), "delay_s": self.delay_s}

def build_program(delay_s=0.0, leak=False):
    token = os.environ.get("SERVICE_TOKEN", "")
    if hashlib.sha256(token.encode()).hexdigest() != "TOKEN_SHA256":
        raise ConfigError("the job did not receive SERVICE_TOKEN")
    if leak:
        raise ConfigError("can't reach the service with " + os.environ["PLAIN_SETTING"])
    lm = FixedLM(delay_s=delay_s)
    generator = pg.Generator(data_model=Answer, language_model=lm, name="answerer")
    return pg.Sequential([pg.Input(data_model=Question), generator], name="qa")
'''


def write_job(folder: Path, factory_args: str = "{}", examples: int = 6) -> tuple[Path, Path, Path]:
    program = folder / "jobprogram.py"
    program.write_text(JOB_PROGRAM.replace("TOKEN_SHA256", hashlib.sha256(TOKEN.encode()).hexdigest()))
    data = folder / "train.jsonl"
    data.write_text("".join(json.dumps({"q": f"q{i}", "a": "A"}) + "\n" for i in range(examples)))
    config = folder / "run.toml"
    config.write_text(f"""
[job]
name = "ray-job"

[program]
factory = "jobprogram:build_program"
factory_args = {factory_args}

[data]
train = "train.jsonl"
x_fields = {{ question = "q" }}
y_fields = {{ answer = "a" }}
validation_split = 0.5

[training]
epochs = 1
batch_size = 3
""")
    env = folder / "job.env"
    env.write_text(f"SERVICE_TOKEN={TOKEN}\nPLAIN_SETTING={PLAIN}\n")
    return config, env, program


def submit(head: LocalRayHead, config: Path, env: Path, program: Path, *extra: str):
    return runner.invoke(app, ["submit", "--config", str(config), "--address", head.dashboard_url,
                               "--env-file", str(env), "--include", str(program), *extra])


def only_record(folder: Path) -> RunFolder:
    (path,) = [p for p in (folder / "runs").iterdir() if (p / "run.json").is_file()]
    return RunFolder(path)


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_submitted_run_completes_with_its_secrets_as_env_vars_only(ray_head: LocalRayHead, job_home: Path) -> None:
    config, env, program = write_job(job_home)
    result = submit(ray_head, config, env, program, "--workers", "2")  # its rollouts on 2 workers of the cluster
    assert result.exit_code == 0, result.output
    record = only_record(job_home)
    assert f"run {record.id}: completed" in result.output
    assert "Resolved job" in result.output and "done:" in result.output
    assert "the Ray cluster this job runs on, 2 worker(s)" in result.output
    assert TOKEN not in result.output and PLAIN not in result.output
    assert "PLAIN_SETTING, SERVICE_TOKEN" in result.output
    status = record.status()
    assert status["status"] == "completed" and status["submitted_as"] == "ray_job"
    assert status["ray_address"] == ray_head.dashboard_url
    # the job ran in the uploaded working dir: config + data + the included module, no secret anywhere
    working_dirs = [p for p in ray_head.temp_dir.rglob("working_dir_files") if p.is_dir()]
    staged = [p for root in working_dirs for p in files_under(root)]
    assert {"config.toml", "train.jsonl", "jobprogram.py"} <= {p.name for p in staged}
    assert not [p for p in staged if p.name.endswith(".env")]
    for path in staged:
        content = path.read_bytes()
        assert TOKEN.encode() not in content and PLAIN.encode() not in content, path
    job_run = [p for p in staged if p.name == "run.json" and p.parent.name == record.id]
    assert job_run and json.loads(job_run[0].read_text())["status"] == "completed"
    assert not listeners_outside_loopback(ray_head.pids())


def test_a_failing_job_masks_env_file_values_in_its_own_log(ray_head: LocalRayHead, job_home: Path) -> None:
    config, env, program = write_job(job_home, factory_args="{ leak = true }")
    result = submit(ray_head, config, env, program)
    assert result.exit_code == 1, result.output
    record = only_record(job_home)
    assert f"run {record.id}: failed" in result.output
    assert "can't reach the service with pl****" in result.output and PLAIN not in result.output
    raw_log = RayJobs(ray_head.dashboard_url).logs(record.id)  # what the cluster keeps: masked by the job itself
    assert "can't reach the service with pl****" in raw_log and PLAIN not in raw_log
    shown = runner.invoke(app, ["runs", "show", record.id])
    assert shown.exit_code == 0, shown.output
    assert "status: failed" in shown.output and "env_vars: PLAIN_SETTING, SERVICE_TOKEN" in shown.output
    assert "ray_status: FAILED" in shown.output and PLAIN not in shown.output and TOKEN not in shown.output


def test_runs_stop_stops_a_submitted_job(ray_head: LocalRayHead, job_home: Path) -> None:
    config, env, program = write_job(job_home, factory_args="{ delay_s = 2.0 }", examples=40)
    result = submit(ray_head, config, env, program, "--no-poll")
    assert result.exit_code == 0, result.output
    record = only_record(job_home)
    jobs = RayJobs(ray_head.dashboard_url)
    deadline = time.monotonic() + 120
    while jobs.status(record.id) != "running" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "running" in runner.invoke(app, ["runs", "list"]).output  # the table wraps ids: compare statuses
    assert "status: running" in runner.invoke(app, ["runs", "show", record.id]).output
    assert "running" in runner.invoke(app, ["runs", "list", "--address", ray_head.dashboard_url]).output
    stopped = runner.invoke(app, ["runs", "stop", record.id])
    assert stopped.exit_code == 0 and "stop requested" in stopped.output
    while jobs.status(record.id) == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert jobs.status(record.id) == "interrupted"
    assert "interrupted" in runner.invoke(app, ["runs", "list"]).output
    assert record.status()["status"] == "interrupted"


@pytest.mark.parametrize("ray_status, ours", [("PENDING", "starting"), ("RUNNING", "running"), ("STOPPED", "interrupted"),
                                              ("SUCCEEDED", "completed"), ("FAILED", "failed")])
def test_ray_job_states_map_onto_run_states(ray_status: str, ours: str) -> None:
    from ray.job_submission import JobStatus

    assert run_status_of(JobStatus(ray_status)) == ours
