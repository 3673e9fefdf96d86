"""``MLflowLogger``: params, per-step and per-epoch metrics, the best program and plots, in MLflow.

    logger = callbacks.MLflowLogger(tracking_uri="http://127.0.0.1:5000", experiment_name="dates")
    await program.fit(x, y, callbacks=[logger])      # one MLflow run per fit()
    # a local folder works too: tracking_uri="./mlruns" (MLflow's file store)

The metric names are those of :mod:`promptgym.training.scalars` (``epoch/val_reward``,
``sft/loss``, ``rl/mean_reward``, ...), so prompt learning, SFT and RL runs compare side by
side. Uses ``mlflow-skinny`` (the client, no server dependencies); the ``[logging] mlflow``
table of a ``promptgym train`` config does the same for every flow.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit
from urllib.request import url2pathname

from promptgym.core.events import ArtifactsWritten, Event, RunFinished, RunStarted, TrainBegin, TrainEnd
from promptgym.training.event_sink import EventSinkCallback
from promptgym.training.logger_checks import LoggerSetupError, ensure_writable_folder
from promptgym.training.scalars import event_scalars

RUN_STATUS = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
ARTIFACT_SUFFIXES = (".json", ".md", ".csv", ".png", ".toml", ".jsonl")
MAX_ARTIFACT_BYTES = 20_000_000
MAX_PARAM_CHARS = 500  # MLflow refuses longer parameter values


def tracking_uri_of(value: str | None) -> str | None:
    """A local folder as a ``file://`` URI (MLflow's file store); a server URL as given."""
    if not value:
        return None
    if urlsplit(value).scheme in ("http", "https", "file", "databricks", "sqlite", "postgresql", "mysql"):
        return value
    return Path(value).expanduser().resolve().as_uri()


def flatten_params(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config values as ``section.key`` strings (lists as JSON)."""
    flat: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, f"{name}."))
        elif value is not None:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            flat[name] = text[:MAX_PARAM_CHARS]
    return flat


class MLflowLogger(EventSinkCallback):
    """One MLflow run per training run (synalinks' ``Monitor`` arguments where they exist).

    Args:
        tracking_uri: a server URL, or a local folder (default ``./mlruns``).
        experiment_name: created when missing (default: the program's name).
        run_name, tags: the MLflow run's name and tags.
        params: extra parameters (a config; nested keys are flattened).
        log_program: save the program (``program/<name>.json``) when training ends.
        log_plots: save the training-history plot (matplotlib) when training ends.
        artifacts_dir: a folder whose small files (JSON, CSV, Markdown, PNG) are logged when the
            run writes its artifacts (the CLI passes the run folder).
    """

    def __init__(self, tracking_uri: str | None = None, experiment_name: str | None = None,
                 run_name: str | None = None, tags: Mapping[str, Any] | None = None,
                 params: Mapping[str, Any] | None = None, log_program: bool = True, log_plots: bool = True,
                 artifacts_dir: str | Path | None = None) -> None:
        super().__init__()
        self.tracking_uri = tracking_uri_of(tracking_uri) or tracking_uri_of("mlruns")
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tags = {key: str(value) for key, value in (tags or {}).items()}
        self.extra_params = flatten_params(params or {})
        self.log_program = log_program
        self.log_plots = log_plots
        self.artifacts_dir = Path(artifacts_dir) if artifacts_dir is not None else None
        self.run_id: str | None = None
        self.history: list[dict[str, Any]] = []
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                from mlflow.tracking import MlflowClient  # deferred: MLflow takes ~2 s to import
            except ImportError:
                raise ImportError("callbacks.MLflowLogger needs MLflow: pip install 'promptgym[observability]' "
                                  "(mlflow-skinny)") from None
            if self.tracking_uri.startswith("file:"):
                # MLflow 3 keeps the file store only on request; a folder given here is that request.
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def check_setup(self) -> None:
        """A file store that can't be written, or a run MLflow refuses to create, named before any epoch."""
        where = f"callbacks.MLflowLogger(tracking_uri={self.tracking_uri!r})"
        if self.tracking_uri.startswith("file:"):
            ensure_writable_folder(Path(url2pathname(urlsplit(self.tracking_uri).path)), where)
        try:
            self.start()
        except LoggerSetupError:
            raise
        except Exception as error:  # noqa: BLE001 - MLflow's own errors name neither the callback nor the option
            raise LoggerSetupError(f"{where}: could not create the MLflow run: {type(error).__name__}: {error}") from None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Before the first epoch: the tracking store is written to (and the MLflow run created)."""
        self.check_setup()

    # -- the run ----------------------------------------------------------------------------

    def start(self, run_name: str | None = None) -> str:
        """Create the MLflow run (once) and log the parameters; returns its id."""
        if self.run_id is not None:
            return self.run_id
        name = self.experiment_name or getattr(self.program, "name", None) or "promptgym"
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment is not None else self.client.create_experiment(name)
        run = self.client.create_run(experiment_id, run_name=self.run_name or run_name,
                                     tags={"promptgym.program": str(getattr(self.program, "name", "")), **self.tags})
        self.run_id = run.info.run_id
        self._log_params({**self._program_params(), **self.extra_params})
        return self.run_id

    def end(self, status: str = "FINISHED") -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id, status)
            self.run_id = None

    def _log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(key, value) for key, value in params.items()]
        for start in range(0, len(items), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=items[start:start + 100])

    def _program_params(self) -> dict[str, str]:
        state = getattr(self.program, "training_setup", None)
        if state is None:
            return {}
        found = {"optimizer": type(state.optimizer).__name__ if state.optimizer is not None else None,
                 "reward": getattr(state.reward, "name", type(state.reward).__name__) if state.reward is not None else None,
                 "metrics": ", ".join(getattr(metric, "name", type(metric).__name__) for metric in state.metrics or [])}
        get_config = getattr(state.optimizer, "get_config", None)
        if callable(get_config):
            found.update({f"optimizer.{key}": value for key, value in flatten_params(get_config()).items()})
        return {key: str(value)[:MAX_PARAM_CHARS] for key, value in found.items() if value not in (None, "")}

    def log_metrics(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        if self.run_id is None:
            self.start()
        stamp = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(key, float(value), stamp, int(step))
                                                    for key, value in values.items()])

    # -- events (fit, the weight flows, the CLI) ------------------------------------------

    def on_event(self, event: Event) -> None:
        self._track(event)
        if isinstance(event, (RunStarted, TrainBegin)):
            self.start(run_name=getattr(event, "run_id", None))
        if isinstance(event, TrainEnd) and event.history:
            self.history = list(event.history)
        scalars = event_scalars(event)
        if scalars is not None and scalars[1]:
            self.log_metrics(scalars[1], scalars[0])
        if isinstance(event, ArtifactsWritten) and self.artifacts_dir is not None:
            self.log_folder(self.artifacts_dir)
        if isinstance(event, RunFinished):
            self.end(RUN_STATUS.get(event.status, "FINISHED"))

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self.run_id is None or self.program is None:
            return
        with tempfile.TemporaryDirectory() as folder:
            if self.log_program:
                path = Path(folder) / f"{self.program.name}.json"
                self.program.save(str(path))
                self.client.log_artifact(self.run_id, str(path), "program")
            if self.log_plots and self.history:
                self._log_history_plot(Path(folder))
        if self.artifacts_dir is None:  # fit() on its own: the run ends with training
            self.end()

    def _log_history_plot(self, folder: Path) -> None:
        try:
            from promptgym.utils.plotting import plot_history  # deferred: matplotlib

            keys = sorted({key for row in self.history for key in row if key != "epoch"})
            series = {key: [row.get(key) for row in self.history] for key in keys}
            path = plot_history(series, to_folder=str(folder), to_file="training_history.png")
        except Exception:  # noqa: BLE001 - a plot is a nicety (matplotlib may be missing); the metrics are logged
            return
        self.client.log_artifact(self.run_id, str(path), "plots")

    def log_folder(self, folder: Path) -> None:
        """The small result files of a run folder (configs, summaries, history, plots, the best program)."""
        if self.run_id is None or not folder.is_dir():
            return
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix in ARTIFACT_SUFFIXES and path.stat().st_size <= MAX_ARTIFACT_BYTES \
                    and path.name != "events.jsonl":
                self.client.log_artifact(self.run_id, str(path), "run")
