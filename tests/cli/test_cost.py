"""``[budget] max_usd`` in a train config: the run stops before crossing it, says so, and resumes."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from promptgym.cli.main import app
from tests.cli.helpers import only_run, write_config

runner = CliRunner()
PRICED = '[program]\nfactory = "tests.cli.helpers:build_priced_program"'


def test_a_capped_run_stops_under_its_cap_and_resumes_with_a_raised_one(workdir: Path) -> None:
    config = write_config(workdir, epochs=3, program=PRICED, extra="\n[budget]\nmax_usd = 0.004\n")
    result = runner.invoke(app, ["train", "--config", str(config), "--yes"])
    assert result.exit_code == 0, result.output
    run = only_run(workdir)
    status = run.status()
    assert status["status"] == "stopped_by_budget" and status["stopped_by"] == "max_usd"
    assert 0 < status["cost_usd"] <= 0.004
    summary = (run.path / "summary.md").read_text()
    assert "stopped by max_usd" in summary and "- Spend: $0.00" in summary and "cap $0.0040, reached" in summary
    assert (run.path / "best_program.json").is_file()

    saved = run.path / "config.toml"
    saved.write_text(saved.read_text().replace("max_usd = 0.004", "max_usd = 5.0"))
    result = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert result.exit_code == 0, result.output
    status = run.status()
    assert status["status"] == "completed" and status["epochs_done"] == 3
    assert status["cost_usd"] > 0.004 and "- Spend: $" in (run.path / "summary.md").read_text()
