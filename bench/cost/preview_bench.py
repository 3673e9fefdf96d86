"""``train --preview``'s cost estimate against what the same run then spends, on three jobs (fake server).

Each job is previewed (``promptgym train --preview``: the headroom check's
calls are timed and priced, then scaled to the run's call estimate), then
run (``--yes``); the estimate is compared with ``run.json``'s ``cost_usd``.
The model is ``openai/fake`` on ``bench/fake_openai_server.py``, priced at
the table's ``gpt-4o-mini`` price, cache off.

Run: ``python bench/cost/preview_bench.py`` (writes ``bench/results/cost_preview.json``).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from bench.fake_openai_server import start_fake_server  # noqa: E402
from promptgym.cli.main import app  # noqa: E402
from promptgym.runs.folder import list_runs  # noqa: E402
from promptgym.lm.prices import table_price  # noqa: E402
from promptgym.testing import qa_run_config  # noqa: E402

PRICE = table_price("gpt-4o-mini")
RESULTS = ROOT / "bench" / "results" / "cost_preview.json"
ESTIMATE = re.compile(r"est\. cost: \$([0-9.,]+) \(95% interval \$([0-9.,]+)-\$([0-9.,]+)\) for <= (\d+) calls")

JOBS = {
    "few-shot, labels as demonstrations": {"optimizer": 'name = "randomfewshot"\nparams = { nb_max_examples = 3 }',
                                           "words": 4, "examples": 40},
    "few-shot, bootstrapped demonstrations": {
        "optimizer": 'name = "randomfewshot"\nparams = { nb_max_examples = 3, use_labels = false }',
        "words": 10, "examples": 40},
    "greedy, longer inputs": {"optimizer": 'name = "greedyoptimizer"\nparams = { nb_max_examples = 2 }',
                              "words": 30, "examples": 32},
}


def write_job(folder: Path, api_base: str, name: str, job: dict[str, Any]) -> Path:
    words = ["river", "stone", "cloud", "lamp", "garden", "window", "mountain", "bird"]
    rows = [{"prompt": " ".join(words[(i + k) % len(words)] for k in range(job["words"])) + f" {i}", "label": "x"}
            for i in range(job["examples"])]
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = folder / f"{name}.toml"
    model = f"""[model]
name = "openai/fake"
api_base = "{api_base}"
cache = false
max_tokens = 64
price = {{ input_per_mtok = {PRICE.input_per_mtok}, output_per_mtok = {PRICE.output_per_mtok} }}"""
    config.write_text(qa_run_config(data, name=name, model=model, optimizer=job["optimizer"],
                                    training="epochs = 2\nbatch_size = 4"))
    return config


def number(text: str) -> float:
    return float(text.replace(",", ""))


def main() -> None:
    runner = CliRunner()
    rows = []
    with start_fake_server(latency_s=0.002) as server, tempfile.TemporaryDirectory(prefix="promptgym-preview-") as tmp:
        folder = Path(tmp)
        for index, (label, job) in enumerate(JOBS.items()):
            name = f"job{index}"
            config = write_job(folder, f"{server.url}/v1", name, job)
            runs = folder / "runs"
            preview = runner.invoke(app, ["train", "-c", str(config), "--preview", "--runs-dir", str(runs)])
            match = ESTIMATE.search(preview.output.replace("\n", " "))
            if preview.exit_code != 0 or match is None:
                raise SystemExit(f"{label}: no estimate in the preview:\n{preview.output}")
            result = runner.invoke(app, ["train", "-c", str(config), "--yes", "--runs-dir", str(runs)])
            if result.exit_code != 0:
                raise SystemExit(f"{label}: the run failed:\n{result.output}")
            run = next(r for r in list_runs(runs) if r["id"].startswith(name) or r.get("name") == name)
            status = json.loads((runs / run["id"] / "run.json").read_text())
            estimate, low, high, calls = (number(match.group(i)) for i in range(1, 5))
            spent = float(status["cost_usd"])
            rows.append({"job": label, "estimate_usd": estimate, "interval_usd": [low, high], "estimated_calls": calls,
                         "spent_usd": spent, "lm_calls": status["lm_calls"], "ratio": estimate / spent,
                         "within_25pct": abs(estimate - spent) <= 0.25 * spent, "spent_in_interval": low <= spent <= high})
    result = {"bench": "cost_preview", "price": PRICE.as_dict(), "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    for row in rows:
        print(f"{row['job']:<40} est ${row['estimate_usd']:.5f} [{row['interval_usd'][0]:.5f}, "
              f"{row['interval_usd'][1]:.5f}] ({row['estimated_calls']:.0f} calls)  spent ${row['spent_usd']:.5f} "
              f"({row['lm_calls']} calls)  ratio {row['ratio']:.2f}")


if __name__ == "__main__":
    main()
