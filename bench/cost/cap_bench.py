"""The dollar-cap bench: 20 seeded runs against the fake server at concurrency 8, spend counted at the wire.

For each seed: a full run with no cap (its cost C), a run capped at a seeded
fraction of C (30-80%) with ``BackupAndRestore(save_freq=1)``, then that run
resumed from its backup with a cap of 2C. The model is ``openai/fake``
behind ``bench/counting_proxy.py``, priced at the pinned table's
``gpt-4o-mini`` price, response cache off (so every call is paid at the
wire). Checked per seed:

- the capped run stopped by the cap (``history.spend["capped"]``), and the
  dollars at the wire (proxy tokens x price) never exceed the cap;
- promptgym's own figure equals the wire's;
- the resumed run finishes all its epochs, its total counts both sessions,
  and the two sessions together stay under the resumed cap.

Run: ``python bench/cost/cap_bench.py`` (writes ``bench/results/cost_cap.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import promptgym as pg  # noqa: E402
from bench.counting_proxy import start_counting_proxy  # noqa: E402
from bench.fake_openai_server import start_fake_server  # noqa: E402
from promptgym.lm.prices import table_price  # noqa: E402

PRICE = table_price("gpt-4o-mini")
RESULTS = ROOT / "bench" / "results" / "cost_cap.json"


class Question(pg.DataModel):
    question: str = pg.Field(description="A question")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The answer")


def data(seed: int, n: int = 48) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    words = ["river", "stone", "cloud", "lamp", "garden", "window", "mountain", "bird"]
    x = np.array([Question(question=" ".join(rng.choice(words, size=int(rng.integers(2, 12)))) + f" #{i}")
                  for i in range(n)], dtype=object)
    y = np.array([Answer(answer="x") for _ in range(n)], dtype=object)
    return x, y


async def program_on(api_base: str) -> pg.Program:
    lm = pg.LanguageModel("openai/fake", api_base=api_base, concurrency=8, cache=False, max_tokens=256,
                          price=PRICE, retries=0)
    inputs = pg.Input(data_model=Question)
    outputs = await pg.Generator(data_model=Answer, language_model=lm, name="generator")(inputs)
    program = pg.Program(inputs=inputs, outputs=outputs, name="capped")
    program.compile(reward=pg.rewards.ExactMatch(in_mask=["answer"]),
                    optimizer=pg.optimizers.RandomFewShot(nb_max_examples=3, use_labels=False))
    return program


def wire_usd(proxy_url: str) -> tuple[float, int]:
    stats = httpx.get(f"{proxy_url}/stats").json()
    httpx.post(f"{proxy_url}/stats/reset")
    return PRICE.usd(stats["prompt_tokens"], stats["completion_tokens"]), int(stats["requests"])


async def one_seed(seed: int, api_base: str, proxy_url: str, epochs: int) -> dict[str, Any]:
    x, y = data(seed)
    fit = dict(x=x, y=y, validation_split=0.25, epochs=epochs, batch_size=8, seed=seed, verbose=0)
    wire_usd(proxy_url)
    full = await (await program_on(api_base)).fit(**fit)
    full_usd, full_calls = wire_usd(proxy_url)
    fraction = float(np.random.default_rng(1000 + seed).uniform(0.3, 0.8))
    cap = fraction * full_usd
    with tempfile.TemporaryDirectory(prefix="promptgym-cap-") as folder:
        backup = pg.callbacks.BackupAndRestore(backup_dir=folder, save_freq=1)
        capped_program = await program_on(api_base)
        started = time.perf_counter()
        capped = await capped_program.fit(**fit, max_usd=cap, callbacks=[backup])
        capped_s = time.perf_counter() - started
        capped_usd, capped_calls = wire_usd(proxy_url)
        backup_kept = (Path(folder) / "latest.program.json").exists()
        resumed_program = await program_on(api_base)
        resumed = await resumed_program.fit(**fit, max_usd=2 * full_usd,
                                            callbacks=[pg.callbacks.BackupAndRestore(backup_dir=folder, save_freq=1)])
        resumed_usd, resumed_calls = wire_usd(proxy_url)
    return {
        "seed": seed, "full_usd": full_usd, "full_reported_usd": full.spend["cost_usd"], "full_calls": full_calls,
        "cap_fraction": round(fraction, 4),
        "cap_usd": cap, "capped_wire_usd": capped_usd, "capped_reported_usd": capped.spend["cost_usd"],
        "capped_calls": capped_calls, "capped_stopped": bool(capped.spend["capped"]),
        "capped_epochs_done": len(capped.epoch), "capped_seconds": round(capped_s, 3),
        "crossed": capped_usd > cap, "cap_used": capped_usd / cap,
        "peak_in_flight": capped.spend["peak_in_flight"], "peak_committed_usd": capped.spend["peak_committed_usd"],
        "backup_kept": backup_kept, "resumed_calls": resumed_calls, "resumed_wire_usd": resumed_usd,
        "resumed_reported_total_usd": resumed.spend["cost_usd"], "resumed_finished": not resumed.spend["capped"],
        "resumed_epochs": len(resumed.epoch), "resumed_last_epoch": resumed.epoch[-1] if resumed.epoch else None,
        "two_sessions_usd": capped_usd + resumed_usd, "two_sessions_under_resumed_cap":
            capped_usd + resumed_usd <= 2 * full_usd,
    }


async def main_async(seeds: int, epochs: int, latency_ms: float) -> dict[str, Any]:
    with start_fake_server(latency_s=latency_ms / 1000) as server, start_counting_proxy(server.url) as proxy:
        rows = [await one_seed(seed, f"{proxy.url}/v1", proxy.url, epochs) for seed in range(seeds)]
    summary = {
        "runs": len(rows), "crossed": sum(r["crossed"] for r in rows),
        "stopped_by_cap": sum(r["capped_stopped"] for r in rows),
        "reported_equals_wire": sum(abs(r["capped_reported_usd"] - r["capped_wire_usd"]) <= 1e-12 for r in rows),
        "resumed_and_finished": sum(r["resumed_finished"] and r["resumed_last_epoch"] == epochs - 1 for r in rows),
        "backup_kept": sum(r["backup_kept"] for r in rows),
        "max_cap_used": max(r["cap_used"] for r in rows), "min_cap_used": min(r["cap_used"] for r in rows),
        "mean_cap_used": float(np.mean([r["cap_used"] for r in rows])),
        "max_peak_in_flight": max(r["peak_in_flight"] for r in rows),
        "two_sessions_under_resumed_cap": sum(r["two_sessions_under_resumed_cap"] for r in rows),
        "resumed_total_equals_both_sessions": sum(abs(r["resumed_reported_total_usd"] - r["two_sessions_usd"]) <= 1e-12
                                                  for r in rows),
        "calls_full_runs": sum(r["full_calls"] for r in rows),
        "calls_capped_plus_resumed": sum(r["capped_calls"] + r["resumed_calls"] for r in rows),
    }
    return {"bench": "cost_cap", "price": PRICE.as_dict(), "concurrency": 8, "epochs": epochs,
            "latency_ms": latency_ms, "summary": summary, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=5.0, help="the fake server's time per answer")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.getLogger("promptgym").setLevel(logging.ERROR)  # each capped run logs its stop: the table says it
    result = asyncio.run(main_async(args.seeds, args.epochs, args.latency_ms))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
