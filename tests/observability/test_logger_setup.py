"""A logger that can't write fails before the first epoch, naming the callback (or config key) and the option."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptgym import callbacks
from promptgym.cli.main import app
from promptgym.training.logger_checks import LoggerSetupError
from tests.cli.helpers import write_config
from tests.training.test_fit import compiled_program, data

runner = CliRunner()


class EpochCounter(callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.epochs = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs += 1


@pytest.fixture
def under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain_file").write_text("not a folder")
    return tmp_path / "plain_file" / "logs"


async def test_tensorboard_with_a_log_dir_under_a_file_fails_before_the_first_epoch(under_a_file):
    program, _ = await compiled_program()
    x, y = data()
    counter = EpochCounter()
    with pytest.raises(LoggerSetupError) as raised:
        await program.fit(x=x, y=y, epochs=1, batch_size=4, verbose=0,
                          callbacks=[counter, callbacks.TensorBoard(log_dir=under_a_file)])
    message = str(raised.value)
    assert "callbacks.TensorBoard(log_dir=" in message and str(under_a_file) in message
    assert "is a file, not a folder" in message
    assert counter.epochs == 0


async def test_mlflow_with_a_file_store_under_a_file_fails_before_the_first_epoch(under_a_file):
    program, _ = await compiled_program()
    x, y = data()
    counter = EpochCounter()
    with pytest.raises(LoggerSetupError) as raised:
        await program.fit(x=x, y=y, epochs=1, batch_size=4, verbose=0,
                          callbacks=[counter, callbacks.MLflowLogger(tracking_uri=str(under_a_file))])
    message = str(raised.value)
    assert "callbacks.MLflowLogger(tracking_uri=" in message and "is a file, not a folder" in message
    assert counter.epochs == 0


def test_a_cli_tensorboard_folder_that_cannot_be_written_is_named_before_the_run(workdir: Path):
    (workdir / "tb").write_text("a file where the folder should be")
    config = write_config(workdir, extra='[logging]\ntensorboard = "tb"\n')
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 2, result.output
    assert "logging.tensorboard: TensorBoard can't write its logs there" in result.output and "is a file, not a folder" in result.output
    assert "Traceback" not in result.output
    assert not list((workdir / "runs").glob("*/history.csv"))  # no epoch ran


def test_a_cli_mlflow_file_store_that_cannot_be_written_is_named_before_the_run(workdir: Path):
    (workdir / "mlruns").write_text("a file where the folder should be")
    config = write_config(workdir, extra='[logging]\nmlflow = { tracking_uri = "mlruns" }\n')
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 2, result.output
    assert "logging.mlflow.tracking_uri: MLflow can't keep its file store there" in result.output and "is a file, not a folder" in result.output
