"""Per-call work of llama_cpp.server from its log: prompt tokens it evaluated, generated tokens, seconds.

    .venv/bin/python bench/training/server_log_stats.py /tmp/promptgym-bench-llama-promptgym-dates_dmy_200.log \
        zero-shot:200 knn:200 fixed-train:60 fixed-eval:200

Wall time per call on a shared machine mostly measures the other jobs; the server's own
counts do not: "evaluated prompt tokens" are the tokens it had to process because they
were not in its prefix cache (a fixed set of demonstrations is evaluated once, retrieved
ones on every call). Sections are consecutive calls in the log (run_all.py appends every
run of a (framework, task) to the same log), given as ``name:count``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

PROMPT = re.compile(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens")
GENERATED = re.compile(r"^\S+\s+eval time =\s+([\d.]+) ms /\s+(\d+) runs", re.MULTILINE)
TOTAL = re.compile(r"total time =\s+([\d.]+) ms")


def sections(text: str, spec: list[tuple[str, int]]) -> dict[str, dict[str, float]]:
    """``{name: {"calls", "evaluated_prompt_tokens_per_call", ...}}`` for consecutive runs of calls."""
    prompt = [(float(ms), int(n)) for ms, n in PROMPT.findall(text)]
    generated = [(float(ms), int(n)) for ms, n in GENERATED.findall(text)]
    total = [float(ms) for ms in TOTAL.findall(text)]
    if sum(n for _, n in spec) > len(total):
        raise SystemExit(f"the sections ask for {sum(n for _, n in spec)} calls; the log has {len(total)}")
    out, start = {}, 0
    for name, count in spec:
        p, g, t = (xs[start:start + count] for xs in (prompt, generated, total))
        out[name] = {"calls": count,
                     "evaluated_prompt_tokens_per_call": round(statistics.mean(n for _, n in p), 1),
                     "prompt_ms_per_token": round(sum(ms for ms, _ in p) / max(1, sum(n for _, n in p)), 1),
                     "generated_tokens_per_call": round(statistics.mean(n for _, n in g), 1),
                     "generation_ms_per_token": round(sum(ms for ms, _ in g) / max(1, sum(n for _, n in g)), 1),
                     "server_seconds_per_call": round(statistics.mean(t) / 1000, 3)}
        start += count
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("sections", nargs="+", help="name:count, in log order")
    args = parser.parse_args()
    spec = [(s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for s in args.sections]
    print(json.dumps({"log": args.log, "sections": sections(Path(args.log).read_text(), spec)}, indent=1))


if __name__ == "__main__":
    main()
