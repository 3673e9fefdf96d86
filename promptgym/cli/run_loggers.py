"""The ``[logging]`` table of a run config: MLflow, TensorBoard and OpenTelemetry for every flow.

    [logging]
    mlflow = { tracking_uri = "http://127.0.0.1:5000", experiment = "dates" }
    tensorboard = "tb"          # one subfolder per run: tensorboard --logdir tb
    otel = true                 # spans.jsonl in the run folder

Each is a listener of the run's event records, so prompt learning, SFT and RL report the same
way. A logger that fails (a server down) warns once and stops; the run goes on.
"""

from __future__ import annotations

from pathlib import Path

from promptgym.cli.config import JobConfig, resolved_dict
from promptgym.cli.secrets import Masker
from promptgym.runs.events import Listener
from promptgym.runs.folder import RunFolder
from promptgym.runs.loggers import SpanFile, guarded
from promptgym.training.mlflow_logger import MLflowLogger
from promptgym.training.tensorboard import TensorBoard


def with_run_loggers(listeners: list[Listener] | None, config: JobConfig, run: RunFolder,
                     masker: Masker) -> list[Listener]:
    """``listeners`` plus one for each logger the config's ``[logging]`` table asks for."""
    section = config.logging
    added: list[Listener] = []
    if section.tensorboard:
        added.append(guarded("TensorBoard", TensorBoard(log_dir=Path(section.tensorboard) / run.id)))
    if section.mlflow is not None:
        spec = section.mlflow
        added.append(guarded("MLflow", MLflowLogger(
            tracking_uri=spec.tracking_uri, experiment_name=spec.experiment or config.job.name,
            run_name=spec.run_name or run.id, tags={"promptgym.job_type": config.job.type, **spec.tags},
            params=masker.mask_data(resolved_dict(config)), artifacts_dir=run.path)))
    if section.otel:
        added.append(guarded("OpenTelemetry", SpanFile(run.path / "spans.jsonl")))
    return [*(listeners or []), *added]
