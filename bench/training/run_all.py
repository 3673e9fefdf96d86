"""Training benchmark: promptgym vs synalinks vs DSPy on the embedded model, counted at the wire.

    .venv/bin/python bench/training/run_all.py                      # issue 3: RandomFewShot / BootstrapFewShot
    .venv/bin/python bench/training/run_all.py --tasks dates_dmy --frameworks promptgym \
        --promptgym-settings '{"epochs": 2, "batch_size": 10, "minibatch_size": 10}'

For every (task, framework): takes ``/tmp/promptgym-llm.lock`` (flock, shared with other
jobs that run the real model), starts one ``python -m llama_cpp.server`` (the embedded
Qwen2.5-Coder-0.5B-Instruct gguf, 2 threads) on 127.0.0.1 and a counting proxy in front
of it (``--json-object-schema``), runs the framework's script in its venv against the
proxy, then stops both and releases the lock. So no two model processes ever run at once
and every framework starts from a fresh server (no KV-cache carried over).

Writes the task files (``bench/training/data/<task>.json``: seeded train / val / test,
the same for all), appends each JSON row to ``--out`` (default
``bench/results/training_<optimizer>.json``, one row per (framework, task), newest wins)
and prints a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(HERE))

from common import DATA, TASKS  # noqa: E402
from counting_proxy import start_counting_proxy  # noqa: E402
from llama_server import LlamaServer  # noqa: E402

BENCH_HOME = Path(os.environ.get("PROMPTGYM_BENCH_HOME", Path.home() / ".cache" / "promptgym-bench"))
LOCK = "/tmp/promptgym-llm.lock"
SCRIPTS = {"promptgym": "run_promptgym.py", "synalinks": "run_synalinks.py", "dspy": "run_dspy.py"}
PEER_OPTIMIZER = {  # what each framework runs for a given --optimizer
    "randomfewshot": {"promptgym": "randomfewshot", "synalinks": "randomfewshot", "dspy": "bootstrapfewshot"},
    "omega": {"promptgym": "omega", "synalinks": "omega", "dspy": "miprov2"},
    "gepa": {"promptgym": "gepa", "dspy": "gepa"},
    "mipro": {"promptgym": "mipro", "dspy": "miprov2"},
    # issue 18: one fixed set of demonstrations vs the k nearest per input
    "fixed": {"promptgym": "randomfewshot", "dspy": "labeledfewshot"},
    "knn": {"promptgym": "knnfewshot", "dspy": "knnfewshot"},
}


def field_spec(data_model: Any) -> dict[str, Any]:
    """``{"name", "description", "choices"}`` of a one-field DataModel (choices: a Literal's values, else None)."""
    import typing

    (name, info), = data_model.model_fields.items()
    choices = list(typing.get_args(info.annotation)) if typing.get_origin(info.annotation) is typing.Literal else None
    return {"name": name, "description": info.description, "choices": choices}


def load_split(spec: dict[str, Any], n_train: int, n_test: int, seed: int) -> tuple[Any, Any, str]:
    """``((x_train, y_train), (x_test, y_test))`` of the task's packaged data, and the call that made it."""
    from promptgym.datasets import dates, mmlu_topics, reasoning_gym

    kwargs = spec["kwargs"]
    if spec["loader"] == "dates":
        call = f"promptgym.datasets.dates.load_data(n_train={n_train}, n_test={n_test}, seed={seed}, **{kwargs})"
        return dates.load_data(n_train=n_train, n_test=n_test, seed=seed, **kwargs), call
    if spec["loader"] == "mmlu_topics":
        (x_tr, y_tr), (x_te, y_te) = mmlu_topics.load_data(n_train=n_train, seed=seed)
        call = f"promptgym.datasets.mmlu_topics.load_data(n_train={n_train}, seed={seed}); test = its first {n_test}"
        return ((x_tr, y_tr), (x_te[:n_test], y_te[:n_test])), call
    if spec["loader"] == "reasoning_gym":
        call = (f"promptgym.datasets.reasoning_gym.load_data({spec['task']!r}, n_train={n_train}, n_test={n_test}, "
                f"seed={seed}, **{kwargs})")
        return reasoning_gym.load_data(spec["task"], n_train=n_train, n_test=n_test, seed=seed, **kwargs), call
    raise SystemExit(f"unknown loader {spec['loader']!r}")


def write_task(name: str, n_train: int, n_val: int, n_test: int, seed: int) -> Path:
    """Seeded split from packaged data: train + val from the loader's train part (val = its last n_val), test."""
    spec = TASKS[name]
    sizes = {"n_train": n_train, "n_val": n_val, "n_test": n_test, **spec.get("sizes", {})}
    ((x_tr, y_tr), (x_te, y_te)), call = load_split(spec, sizes["n_train"] + sizes["n_val"], sizes["n_test"], seed)
    fin, fout = field_spec(type(x_tr[0])), field_spec(type(y_tr[0]))
    rows = lambda xs, ys: [{fin["name"]: getattr(x, fin["name"]), fout["name"]: getattr(y, fout["name"])}  # noqa: E731
                           for x, y in zip(xs, ys)]
    train = rows(x_tr, y_tr)
    task = {"name": name, "source": f"{call}; val = last {sizes['n_val']} of train",
            "input": {k: v for k, v in fin.items() if k != "choices"}, "output": fout,
            "train": train[:sizes["n_train"]], "val": train[sizes["n_train"]:], "test": rows(x_te, y_te)}
    DATA.mkdir(exist_ok=True)
    path = DATA / f"{name}.json"
    path.write_text(json.dumps(task, indent=1))
    return path


def model_path(name: str = "qwen2.5-coder-0.5b-instruct") -> str:
    from promptgym.lm.local_models import ensure_local_model

    return str(ensure_local_model(name))


def interpreter(framework: str) -> Path:
    return Path(sys.executable) if framework == "promptgym" else BENCH_HOME / "venvs" / framework / "bin" / "python"


@contextlib.contextmanager
def model_lock(what: str, held: bool = False) -> Iterator[None]:
    """Hold ``/tmp/promptgym-llm.lock`` (flock(2), as ``flock /tmp/promptgym-llm.lock ...``) unless already held."""
    if held:
        yield
        return
    with open(LOCK, "w") as lock:
        waited = time.perf_counter()
        fcntl.flock(lock, fcntl.LOCK_EX)
        print(f"[run_all] {what}: lock after {time.perf_counter() - waited:.0f} s", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_one(framework: str, task: str, optimizer: str, settings: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    python = interpreter(framework)
    if not python.exists():
        return {"framework": framework, "task": task, "optimizer": optimizer,
                "error": f"no venv at {python}: run bench/peers/setup.sh"}
    log_path = Path(f"/tmp/promptgym-bench-llama-{framework}-{task}.log")
    with model_lock(f"{framework} {task} {optimizer}", held=args.lock_scope != "run"):
        extra = {args.optimizer_model: model_path(args.optimizer_model)} if args.optimizer_model else None
        server = LlamaServer(args.model_path, python=args.server_python, n_threads=2, n_ctx=args.n_ctx,
                             log_path=log_path, alias="qwen2.5-coder-0.5b-instruct", extra_models=extra)
        proxy = None
        try:
            started = time.perf_counter()
            server.start()
            proxy = start_counting_proxy(server.url, rewrite_json_schema=True)
            command = [str(python), str(HERE / SCRIPTS[framework]), "--proxy-url", proxy.url, "--task", task,
                       "--optimizer", PEER_OPTIMIZER[optimizer][framework], "--settings", json.dumps(settings),
                       "--max-tokens", str(args.max_tokens), "--concurrency", str(args.concurrency)]
            env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "local",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), str(REPO), os.environ.get("PYTHONPATH", "")]))}
            done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=args.timeout)
            sys.stderr.write(done.stderr[-4000:])
            rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not rows:
                tail = " | ".join(done.stderr.strip().splitlines()[-6:])
                return {"framework": framework, "task": task, "optimizer": optimizer,
                        "error": f"exit {done.returncode}: {tail}"}
            result = rows[-1]
            result["proxy_totals"] = proxy.server.RequestHandlerClass.stats.snapshot() if hasattr(proxy, "server") else None
            result["server_seconds_incl_start"] = round(time.perf_counter() - started, 1)
            result["bench_optimizer"] = optimizer
            return result
        except subprocess.TimeoutExpired:
            return {"framework": framework, "task": task, "optimizer": optimizer, "error": f"timeout {args.timeout}s"}
        finally:
            if proxy is not None:
                proxy.stop()
            server.stop()


def save(out: Path, result: dict[str, Any]) -> None:
    rows = json.loads(out.read_text()) if out.exists() else []
    key = (result.get("framework"), result.get("task"), result.get("bench_optimizer", result.get("optimizer")))
    rows = [r for r in rows if (r.get("framework"), r.get("task"), r.get("bench_optimizer", r.get("optimizer"))) != key]
    rows.append(result)
    out.write_text(json.dumps(rows, indent=1))


def score_cell(result: dict[str, Any] | None) -> str:
    """``"32/40"``, with the 95% interval when the row kept its per-item hits."""
    if not result:
        return "-"
    cell = f"{result['correct']}/{result['n']}"
    if result.get("hits"):
        from promptgym.stats import confidence_interval

        interval = confidence_interval(result["hits"])
        cell += f" ({interval.mean:.1%}, [{interval.low:.1%}, {interval.high:.1%}])"
    return cell


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| task | framework | optimizer | untrained test | trained test (95% CI) | train calls | eval calls | "
             "embedding calls (train / test) | s per test call | train wall s | total wall s |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r.get("task", ""), r.get("framework", ""))):
        if "error" in r:
            lines.append(f"| {r.get('task')} | {r.get('framework')} | {r.get('optimizer')} | error: {r['error'][:100]} "
                         "| | | | | | | |")
            continue
        embedding = r.get("embedding_calls") or {}
        per_call = (r.get("wire", {}).get("trained_eval") or {}).get("seconds_per_call")
        lines.append(f"| {r['task']} | {r['framework']} {r['version']} | {r['settings']['optimizer']['class']} "
                     f"| {score_cell(r['untrained'])} | {score_cell(r['trained'])} | {r['train_calls']} "
                     f"| {r['eval_calls']} | {embedding.get('train', 0)} / {embedding.get('test', 0)} "
                     f"| {per_call if per_call is not None else '-'} "
                     f"| {r['wall_s'].get('train', 0):.0f} | {r['wall_s']['total']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="dates_dmy,dates_iso")
    parser.add_argument("--frameworks", default="promptgym,synalinks,dspy")
    parser.add_argument("--optimizer", default="randomfewshot", choices=sorted(PEER_OPTIMIZER))
    parser.add_argument("--n-train", type=int, default=30)
    parser.add_argument("--n-val", type=int, default=10)
    parser.add_argument("--n-test", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--server-python", default=sys.executable, help="interpreter with llama-cpp-python[server]")
    parser.add_argument("--model-path", default=None)
    parser.add_argument("--optimizer-model", default=None,
                        help="a second local model (e.g. qwen2.5-coder-1.5b-instruct) served next to the task model "
                             "and given to every framework's optimizer as its own LM (settings key optimizer_model)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--lock-scope", default="run", choices=["run", "task", "held"],
                        help="hold the model lock per (framework, task) run, or per task (its frameworks back to back), "
                             "or 'held': the caller holds it (`flock /tmp/promptgym-llm.lock run_all.py ...`; taking it "
                             "again from here would wait on ourselves forever)")
    for fw in SCRIPTS:
        parser.add_argument(f"--{fw}-settings", default="{}", help=f"JSON settings for {fw}'s script")
    args = parser.parse_args()
    args.model_path = args.model_path or model_path()
    out = Path(args.out or BENCH / "results" / f"training_{args.optimizer}.json")
    results = []
    for task in args.tasks.split(","):
        write_task(task, args.n_train, args.n_val, args.n_test, args.seed)
        with model_lock(f"task {task}", held=args.lock_scope in ("run", "held")):
            for framework in args.frameworks.split(","):
                if framework not in PEER_OPTIMIZER[args.optimizer]:
                    continue
                settings = json.loads(getattr(args, f"{framework}_settings"))
                if args.optimizer_model:
                    settings["optimizer_model"] = args.optimizer_model
                result = run_one(framework, task, args.optimizer, settings, args)
                save(out, result)
                results.append(result)
                print(json.dumps({k: result.get(k) for k in ("framework", "task", "untrained", "trained", "train_calls",
                                                             "eval_calls", "wall_s", "error")}), flush=True)
    print(markdown(json.loads(out.read_text())))


if __name__ == "__main__":
    main()
