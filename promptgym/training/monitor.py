"""``Monitor``: synalinks' MLflow callback (one MLflow run per fit / standalone evaluate).

    monitor = Monitor(experiment_name="dates", run_name="fewshot")        # ./mlruns, or $MLFLOW_TRACKING_URI
    await program.fit(x, y, callbacks=[monitor])
    # the run "fewshot_train": fit's params, epoch metrics, the program plot and its trained state

The arguments, defaults and run layout are synalinks' (``program_plots/``,
``model/state_tree.json`` and ``model/info``; artifacts go through the
server's HTTP artifact API when ``tracking_uri`` is given, as synalinks
does). ``callbacks.MLflowLogger`` is promptgym's richer logger (every
trainer event, SFT and RL scalars, docs/observability.md). Needs
``mlflow`` (the ``observability`` extra).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import tempfile
import types
from typing import Any, Coroutine

from promptgym.training.callback import Callback

logger = logging.getLogger("promptgym")

MLFLOW_AVAILABLE = importlib.util.find_spec("mlflow") is not None


class _LazyModule(types.ModuleType):
    """``mlflow``, imported on first use (its import takes a second; most programs never log to it)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


mlflow: Any = _LazyModule("mlflow")


def _run_now(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run one of the Monitor's coroutines from a synchronous hook, inside a running event loop or not.

    They never suspend: MLflow keeps its active run per thread, so every MLflow call stays on the
    thread that started the run (a worker thread would log to a run of its own).
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("Monitor: a logging coroutine suspended")


def _scalars(values: dict[str, Any], kinds: tuple[type, ...]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if isinstance(value, kinds)}


class Monitor(Callback):
    """Logs params, epoch (and optionally batch) metrics, the program plot and its state to MLflow.

    ``experiment_name`` defaults to the program's name; ``tracking_uri`` to MLflow's own default.

    >>> Monitor(run_name="base").log_epoch_metrics
    True
    """

    def __init__(self, experiment_name: str | None = None, run_name: str | None = None,
                 tracking_uri: str | None = None, log_batch_metrics: bool = False, log_epoch_metrics: bool = True,
                 log_program_plot: bool = True, log_program_model: bool = True,
                 tags: dict[str, Any] | None = None) -> None:
        super().__init__()
        if not MLFLOW_AVAILABLE:
            raise ImportError("mlflow is required for the Monitor callback: pip install 'promptgym[observability]'")
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tracking_uri = tracking_uri
        self.log_batch_metrics = log_batch_metrics
        self.log_epoch_metrics = log_epoch_metrics
        self.log_program_plot = log_program_plot
        self.log_program_model = log_program_model
        self.tags = dict(tags or {})
        self._run: Any = None
        self._step = 0
        self._epoch = 0
        self._in_training = False

    # -- the MLflow run ----------------------------------------------------------------------

    def _setup_mlflow(self) -> None:
        if self.tracking_uri:
            mlflow.set_tracking_uri(self.tracking_uri)
        experiment_name = self.experiment_name
        if experiment_name is None and self.program is not None:
            experiment_name = getattr(self.program, "name", None) or "synalinks_experiment"
        mlflow.set_experiment(experiment_name)

    def _start_run(self, run_name_suffix: str = "") -> None:
        run_name = self.run_name
        if run_name and run_name_suffix:
            run_name = f"{run_name}_{run_name_suffix}"
        elif run_name_suffix:
            run_name = run_name_suffix
        self._run = mlflow.start_run(run_name=run_name)
        tags = dict(self.tags)
        for key in ("name", "description"):
            value = getattr(self.program, key, None) if self.program is not None else None
            if value:
                tags[f"program_{key}"] = value
        if tags:
            mlflow.set_tags(tags)
        self._step = 0
        self._epoch = 0

    def _end_run(self) -> None:
        if self._run is not None:
            mlflow.end_run()
            self._run = None

    async def _log_metrics(self, logs: dict[str, Any] | None, step: int | None = None) -> None:
        if logs is None or self._run is None:
            return
        metrics = {key: value for key, value in _scalars(logs, (int, float)).items()
                   if not isinstance(value, bool)}  # a flag (in_fit) is not a metric
        if metrics:
            mlflow.log_metrics(metrics, step=step)

    async def _log_params(self) -> None:
        if self._run is None or self.params is None:
            return
        try:
            params = _scalars(self.params, (str, int, float, bool))
            if params:
                mlflow.log_params(params)
        except Exception as error:  # noqa: BLE001 - a logging failure must not stop training
            logger.warning("Monitor: could not log the params to MLflow: %s", error)

    # -- artifacts ---------------------------------------------------------------------------

    async def _upload_artifact_via_http(self, local_path: str, artifact_path: str | None, run_id: str) -> None:
        """PUT a file through the tracking server's artifact API (``mlflow server --serve-artifacts``)."""
        import requests  # mlflow's own dependency, needed only for a server

        if not self.tracking_uri:
            raise ValueError("Monitor: tracking_uri is required to upload an artifact over HTTP")
        client = mlflow.MlflowClient(tracking_uri=self.tracking_uri)
        run = client.get_run(run_id)
        artifact_uri = run.info.artifact_uri
        filename = os.path.basename(local_path)
        full_path = f"{artifact_path}/{filename}" if artifact_path else filename
        if artifact_uri.startswith("mlflow-artifacts:"):
            uri_path = artifact_uri.replace("mlflow-artifacts://", "").replace("mlflow-artifacts:/", "")
            if "/" in uri_path and not uri_path.startswith("/"):
                head, _, rest = uri_path.partition("/")
                if ":" in head or "." in head:  # a host:port before the path
                    uri_path = rest
        elif artifact_uri.startswith("/"):  # a path on the server: what follows its "artifacts" folder
            parts = artifact_uri.split("/")
            uri_path = "/".join(parts[parts.index("artifacts") + 1:]) if "artifacts" in parts else \
                f"0/{run_id}/artifacts"
        else:
            uri_path = f"0/{run_id}/artifacts"
        url = f"{self.tracking_uri}/api/2.0/mlflow-artifacts/artifacts/{uri_path}/{full_path}"
        with open(local_path, "rb") as handle:
            content = handle.read()
        content_type = {".png": "image/png", ".json": "application/json"}.get(os.path.splitext(local_path)[1],
                                                                              "application/octet-stream")
        response = requests.put(url, data=content, headers={"Content-Type": content_type})
        if response.status_code not in (200, 201, 204):
            raise RuntimeError(f"Failed to upload artifact {full_path} to {url}: {response.status_code} "
                               f"{response.text}")

    async def _log_file(self, path: str, artifact_path: str) -> None:
        # synalinks uploads over HTTP for any tracking_uri; a local store (a path, file://) takes the file directly
        if self.tracking_uri and self.tracking_uri.startswith(("http://", "https://")):
            await self._upload_artifact_via_http(path, artifact_path=artifact_path, run_id=self._run.info.run_id)
        else:
            mlflow.log_artifact(path, artifact_path=artifact_path, run_id=self._run.info.run_id)

    async def _log_program_plot_artifact(self) -> None:
        if self._run is None or self.program is None or not getattr(self.program, "built", False):
            return
        try:
            from promptgym.utils import plot_program  # matplotlib: deferred

            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, f"{getattr(self.program, 'name', None) or 'program'}.png")
                plot_program(self.program, to_file=path)
                if os.path.exists(path):
                    await self._log_file(path, "program_plots")
        except Exception as error:  # noqa: BLE001 - a plot is a nicety (matplotlib may be missing)
            logger.warning("Monitor: could not log the program plot: %s", error)

    async def _log_program_model(self) -> None:
        if self._run is None or self.program is None:
            return
        try:
            info = {"program_name": getattr(self.program, "name", None) or "program",
                    "program_description": getattr(self.program, "description", None) or "",
                    "framework": "promptgym",
                    "num_trainable_variables": len(getattr(self.program, "trainable_variables", []))}
            with tempfile.TemporaryDirectory() as folder:
                for name, data in (("state_tree.json", self.program.get_state_tree()), ("model_info.json", info)):
                    path = os.path.join(folder, name)
                    with open(path, "w", encoding="utf-8") as handle:
                        json.dump(data, handle, indent=2, default=str)
                    await self._log_file(path, "model")
        except Exception as error:  # noqa: BLE001 - a logging failure must not stop training
            logger.warning("Monitor: could not log the program state: %s", error)

    # -- hooks -------------------------------------------------------------------------------

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._in_training = True
        self._setup_mlflow()
        self._start_run(run_name_suffix="train")
        _run_now(self._log_params())
        if self.log_program_plot:
            _run_now(self._log_program_plot_artifact())

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        _run_now(self._log_metrics(logs, step=self._step))
        if self.log_program_model:
            _run_now(self._log_program_model())
        self._end_run()
        self._in_training = False

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.log_epoch_metrics:
            self._epoch = epoch
            _run_now(self._log_metrics(logs, step=epoch))

    def _batch_end(self, logs: dict[str, Any] | None) -> None:
        if self.log_batch_metrics:
            self._step += 1
            _run_now(self._log_metrics(logs, step=self._step))

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._batch_end(logs)

    def on_test_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._batch_end(logs)

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._run is None and not self._in_training:  # a standalone evaluate() is a run of its own
            self._setup_mlflow()
            self._start_run(run_name_suffix="test")

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        _run_now(self._log_metrics(logs, step=self._step))
        if self._run is not None and not self._in_training:
            self._end_run()

    def __del__(self) -> None:
        # end our run only if it is still the active one: mlflow.end_run() ends whatever run is active
        run = getattr(self, "_run", None)
        if run is None:
            return
        try:
            active = mlflow.active_run()
            if active is not None and active.info.run_id == run.info.run_id:
                mlflow.end_run()
        except Exception:  # noqa: BLE001 - at interpreter exit mlflow may be half torn down
            pass
