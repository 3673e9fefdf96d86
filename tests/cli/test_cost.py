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
    assert "stopped by max_usd" in summary and "- Spend: $0.00" in summary and "cap $0.004000, reached" in summary
    assert (run.path / "best_program.json").is_file()

    saved = run.path / "config.toml"
    saved.write_text(saved.read_text().replace("max_usd = 0.004", "max_usd = 5.0"))
    result = runner.invoke(app, ["train", "--resume", run.id, "--yes"])
    assert result.exit_code == 0, result.output
    status = run.status()
    assert status["status"] == "completed" and status["epochs_done"] == 3
    assert status["cost_usd"] > 0.004 and "- Spend: $" in (run.path / "summary.md").read_text()


def test_preview_prices_the_timed_calls_and_starts_nothing(workdir: Path) -> None:
    config = write_config(workdir, epochs=2, program=PRICED, extra="\n[budget]\nmax_usd = 0.0001\n")
    result = runner.invoke(app, ["train", "--config", str(config), "--preview"])
    assert result.exit_code == 0, result.output
    assert "est. cost: $" in result.output and "95% interval" in result.output and "timed calls" in result.output
    assert "max_usd=$0.000100 will likely stop it early" in result.output
    assert "preview: nothing started" in result.output and not (workdir / "runs").exists()


def test_preview_of_a_free_model_estimates_zero(workdir: Path) -> None:
    config = write_config(workdir, epochs=2)  # the scripted model's default price is $0
    result = runner.invoke(app, ["train", "--config", str(config), "--preview"])
    assert result.exit_code == 0, result.output
    assert "est. cost: $0.0000" in result.output


def test_the_event_lines_show_the_dollars_and_the_stop() -> None:
    from promptgym.cli.render import describe

    line = describe({"event": "epoch_end", "epoch": 0, "logs": {"reward": 0.5, "cost_usd": 0.0123, "unpriced_calls": 2},
                     "best_candidate": 1})
    assert line == "epoch 1: reward=0.500 cost=$0.0123 + unknown (2 unpriced calls) (best candidate 1)"
    stop = describe({"event": "spend_cap_reached", "limit_usd": 1.0, "spent_usd": 0.98, "epoch": 2, "step": 3})
    assert stop.startswith("stopped by max_usd=$1.0000: $0.9800 spent") and "epoch 3, step 4" in stop
