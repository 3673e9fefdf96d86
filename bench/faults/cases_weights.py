"""The weight flows' fault cases (issue 27): SFT, RL, the fine-tuned-model registry, run folders, Ray, export.

SFT and RL cases train the tiny in-test model (a 2-layer Llama built once per bench run, no download)
through ``tiny_cli.py``, the CLI with the GGUF export recorded instead of run (llama.cpp's converter
doesn't know the tiny model's tokenizer). Kills (:func:`kill_reports`) kill -9 an SFT and an RL run in
the middle, count the files left corrupt, resume, and count the steps (iterations) trained twice.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import HERE, PYTHON, ROOT, Case, Ran, base_env, cli, snippet, write_files
from configs import config, files, served_model

TINY_CLI = [PYTHON, str(HERE / "tiny_cli.py")]
TINY_APP = ROOT / "tests" / "finetune" / "tiny_task_app.py"
WEIGHT_CATEGORIES = ("sft", "rl", "registry", "runs", "ray", "export")


def build_tiny_model(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.finetune.tiny_model import build_tiny_model as build

    return build(folder)


def chat_rows(count: int) -> str:
    words = ["paris", "rome", "oslo", "lima", "bern", "kiev", "riga", "doha", "baku", "suva", "apia", "male"]
    return "".join(json.dumps({"messages": [{"role": "user", "content": word},
                                            {"role": "assistant", "content": word[::-1]}]}) + "\n"
                   for word in (words[i % len(words)] for i in range(count)))


def sft_toml(model: Path | str, extra: str = "", lora: str = "", rows_file: str = "train.jsonl", name: str = "tiny-sft",
             save_steps: int = 2, validation_split: float = 0.25) -> str:
    return f"""[job]
type = "sft"
name = "{name}"

[sft]
base_model = "{model}"
train_file = "{rows_file}"
n_epochs = 1
batch_size = 4
learning_rate = 0.03
save_steps = {save_steps}
validation_split = {validation_split}
summary_samples = 0
{extra}
[sft.lora]
r = 4
alpha = 8
{lora}
"""


def rl_toml(model: Path | str, app: Path | str = TINY_APP, rl: str = "", data: str = "", iterations: int = 2,
            save_steps: int = 1) -> str:
    return f"""[job]
type = "rl"
name = "tiny-rl"

[data]
task_app = "{app}"
{data}

[rl]
base_model = "{model}"
iterations = {iterations}
batch_size = 2
group_size = 2
max_new_tokens = 4
learning_rate = 0.05
eval_every = 0
save_steps = {save_steps}
{rl}
[rl.lora]
r = 4
alpha = 8
"""


NO_POLICY_APP = '''from promptgym.taskapp import PolicyModule, RolloutResponse, TaskInfo, TrajectoryStep, create_task_app

INFO = TaskInfo(name="no-policy", description="rewards without asking the policy",
                splits={"train": list(range(8)), "test": [100, 101]}, modules=[PolicyModule(name="policy")])


async def rollout(request):
    reward = float(request.seed % 2)
    return RolloutResponse(seed=request.seed, reward=reward, trajectory=[TrajectoryStep(inputs={}, outputs={})])


app = create_task_app(INFO, rollout)
'''


def no_run_folder(ran: Ran) -> str | None:
    runs = ran.folder / "runs"
    made = [path.name for path in runs.iterdir()] if runs.is_dir() else []
    return f"a run folder was made (the check came after loading/training): {made}" if made else None


def sft_cases(model: Path) -> list[Case]:
    rows = chat_rows(12)
    train = [*TINY_CLI, "train", "-c", "sft.toml", "--yes"]

    def with_config(name: str, text: str, mention: tuple[str, ...], extra_files: dict | None = None,
                    check=None, expect: str = "error", argv: list[str] | None = None, exit_code: int | None = 2) -> Case:
        return Case("sft", name, argv or train, expect=expect, mention=mention, exit_code=exit_code,
                    files={"sft.toml": text, "train.jsonl": rows, **(extra_files or {})}, check=check, timeout=180)

    def taken(folder: Path) -> None:
        registry = folder / "models" / "finetuned"
        registry.mkdir(parents=True)
        (registry / "taken.json").write_text(json.dumps({"name": "taken", "base": "b", "run": "/elsewhere"}))

    taken_case = with_config("model_name already registered", sft_toml(model, 'model_name = "taken"'),
                             ("sft.model_name", "already exists"), check=no_run_folder)
    taken_case.prepare = taken
    return [
        with_config("train_file not UTF-8", sft_toml(model), ("train.jsonl:13", "UTF-8"),
                    {"train.jsonl": rows.encode() + b'{"prompt": "caf\xe9", "completion": "x"}\n'}),
        with_config("train_file is a directory", sft_toml(model, rows_file="adir"), ("adir", "directory"),
                    {"adir/.keep": ""}),
        with_config("base_model a .gguf that is not GGUF", sft_toml("fake.gguf"), ("fake.gguf", "not a GGUF"),
                    {"fake.gguf": "hello"}),
        with_config("base_model folder without model_type", sft_toml("hf"), ("hf", "model_type"),
                    {"hf/config.json": json.dumps({"hidden_size": 8})}),
        with_config("lora.target_modules = []", sft_toml(model, lora="target_modules = []"),
                    ("target_modules", "empty")),
        taken_case,
        with_config("preview with 0 validation rows", sft_toml(model, validation_split=0), ("no evaluation",),
                    expect="ok", argv=[*TINY_CLI, "train", "-c", "sft.toml", "--dry-run"],
                    check=lambda ran: "promises an evaluation" if "eval before and after" in ran.output else None),
        with_config("a row that is not JSON (control)", sft_toml(model), ("train.jsonl:2", "bad JSON"),
                    {"train.jsonl": rows.replace("\n", "\n{oops\n", 2)}),
        with_config("unknown [sft] key (control)", sft_toml(model, "learning_rat = 0.1"), ("learning_rat",)),
    ]


def rl_cases(model: Path) -> list[Case]:
    def rl(name: str, text: str, mention: tuple[str, ...], extra: dict | None = None, env: dict | None = None,
           exit_code: int | None = 2, check=None) -> Case:
        return Case("rl", name, [*TINY_CLI, "train", "-c", "rl.toml", "--yes"], mention=mention, exit_code=exit_code,
                    files={"rl.toml": text, **(extra or {})}, env=env or {}, check=check, timeout=240)

    def taken(folder: Path) -> None:
        registry = folder / "models" / "finetuned"
        registry.mkdir(parents=True)
        (registry / "taken.json").write_text(json.dumps({"name": "taken", "base": "b", "run": "/elsewhere"}))

    def not_registered(ran: Ran) -> str | None:
        registry = ran.folder / "models" / "finetuned"
        entries = list(registry.glob("*.json")) if registry.is_dir() else []
        return f"an untrained model was registered: {[p.name for p in entries]}" if entries else None

    taken_case = rl("model_name already registered", rl_toml(model, rl='model_name = "taken"'),
                    ("rl.model_name", "already exists"), check=no_run_folder)
    taken_case.prepare = taken
    return [
        rl("task app never calls the policy", rl_toml(model, app="no_policy_app.py"), ("inference_url",),
           {"no_policy_app.py": NO_POLICY_APP}, exit_code=1, check=not_registered),
        rl("task_app file without app", rl_toml(model, app="noapp.py"), ("defines no `app`",), {"noapp.py": "x = 1\n"}),
        rl("task app dies mid-run", rl_toml(model), ("exited with code 3", ".task_apps"),
           env={"TINY_EXIT_SEEDS": "0,1,2,3,4,5,6,7,200,201,202"}, exit_code=1),
        rl("task app slower than data.task_timeout", rl_toml(model, rl="max_errors = 0", data="task_timeout = 1"),
           ("data.task_timeout",), env={"TINY_DELAY_S": "3"}, exit_code=1),
        taken_case,
    ]


def registry_cases() -> list[Case]:
    def entries(**named: object) -> dict[str, str]:
        return {f"models/finetuned/{name}.json": value if isinstance(value, str) else json.dumps(value)
                for name, value in named.items()}

    corrupt = entries(**{"ft-corrupt": "{not json"})
    badtype = entries(**{"ft-badtype": {"name": "ft-badtype", "base": "b", "created": "yesterday", "merged": 5}})
    mismatch = entries(**{"ft-file": {"name": "ft-other", "base": "b", "created": 1.0}})
    long_name = "ft-a-rather-long-fine-tuned-model-name-1a2b"
    long_entry = entries(**{long_name: {"name": long_name, "base": "local/smollm2-135m-instruct", "created": 1.0}})

    def gone(name: str):
        return lambda ran: None if not (ran.folder / "models" / "finetuned" / f"{name}.json").exists() else "still there"

    return [
        Case("registry", "models list with a corrupt entry", cli("models", "list"), expect="ok",
             mention=("ft-corrupt", "unreadable"), files=corrupt),
        Case("registry", "models remove a corrupt entry", cli("models", "remove", "ft-corrupt"), expect="ok",
             mention=("removed",), files=corrupt, check=gone("ft-corrupt")),
        Case("registry", "models list with a field of the wrong type", cli("models", "list"), expect="ok",
             mention=("ft-badtype", "created: expected"), files=badtype),
        Case("registry", "models remove an entry with a wrong field", cli("models", "remove", "ft-badtype"),
             expect="ok", mention=("removed",), files=badtype, check=gone("ft-badtype")),
        Case("registry", "models list: name differs from the file name", cli("models", "list"), expect="ok",
             mention=("ft-file", "differs"), files=mismatch),
        Case("registry", "models remove by the inner name", cli("models", "remove", "ft-other"),
             mention=("no fine-tuned model",), files=mismatch),
        Case("registry", "models list at 80 columns keeps the model string", cli("models", "list"), expect="ok",
             mention=(f"local/{long_name}",), files=long_entry, env={"COLUMNS": "80"}),
    ]


def runs_cases() -> list[Case]:
    def status(run_id: str, **values: object) -> dict[str, str]:
        return {f"runs/{run_id}/run.json": json.dumps({"id": run_id, "name": run_id, "created": 1.0, **values})}

    weight_runs = {**status("r-sft", job_type="sft", status="completed", steps_done=12, total_steps=12,
                            final_loss=0.5, model_id="local/ft-sft-1a2b"),
                   **status("r-rl", job_type="rl", status="completed", iterations_done=30, iterations=30,
                            eval_reward_before=0.125, eval_reward_after=0.664, model_id="local/ft-rl-3c4d")}
    bystanders: dict[str, subprocess.Popen] = {}

    def stale_pid(folder: Path) -> None:
        process = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(120)"], start_new_session=True)
        bystanders[str(folder)] = process
        # what a worker killed with -9 left: its pid and identity; the pid now belongs to another program
        write_files(folder, status("r-stale", status="running", job_type="sft", pid=process.pid,
                                   process={"pid": process.pid, "started": "ticks:1", "command_sha256": "0" * 64}))

    def bystander_alive(ran: Ran) -> str | None:
        process = bystanders.pop(str(ran.folder))
        time.sleep(0.3)
        alive = process.poll() is None
        process.kill()
        process.wait()
        return None if alive else "runs stop killed an unrelated process that got the run's old pid"

    partial_events = (
        "from pathlib import Path\nimport json\nfrom promptgym.runs.folder import RunFolder\n"
        "run = RunFolder.create(Path('runs'), 'killed')\nrun.append_event({'event': 'run_started'})\n"
        "open(run.events_path, 'a').write('{\"event\": \"sft_st')\n"
        "run.append_event({'event': 'run_started', 'resume': True})\n"
        "events, _ = run.read_events(on_bad_line=lambda n, t: None)\n"
        "print('RESULT ' + json.dumps({'events': [e.get('resume', False) for e in events]}))\n")
    return [
        Case("runs", "runs stop when the pid now belongs to another program", cli("runs", "stop", "r-stale"),
             mention=("is gone",), exit_code=1, prepare=stale_pid, check=bystander_alive),
        Case("runs", "runs list with SFT and RL runs", cli("runs", "list"), expect="ok",
             mention=("12/12 steps", "30/30 iterations", "local/ft-sft-1a2b", "local/ft-rl-3c4d"), files=weight_runs,
             check=lambda ran: "prompt-learning columns" if "epoch(s)" in ran.output else None),
        Case("runs", "runs list with a run.json that is not JSON", cli("runs", "list"), expect="ok",
             mention=("r-broken", "can't be read"), files={"runs/r-broken/run.json": "{half", **weight_runs}),
        Case("runs", "an event after a half-written line", snippet(partial_events), expect="ok",
             check=lambda ran: None if ran.result().get("events") == [False, True] else f"events read: {ran.result()}"),
        Case("runs", "--env-file line without '='", cli("export-sft-data", "-c", "x.toml", "-o", "o.jsonl",
                                                         "--env-file", "bad.env"),
             mention=("bad.env:2", "JUSTAWORD"), files={"bad.env": "A=1\nJUSTAWORD\n"}),
        Case("runs", "--env-file line '=value'", cli("export-sft-data", "-c", "x.toml", "-o", "o.jsonl",
                                                     "--env-file", "bad.env"),
             mention=("bad.env:1",), files={"bad.env": "=novalue\n"}),
    ]


def export_cases() -> list[Case]:
    program = '[program]\nfactory = "factories:half_wrong"\n'
    text = config(program=program)
    base = files(text)
    export = ["export-sft-data", "-c", "run.toml", "-o", "out.jsonl"]

    def rows_written(ran: Ran) -> int:
        out = ran.folder / "out.jsonl"
        return len(out.read_text().splitlines()) if out.is_file() else 0

    def wrong_rows(ran: Ran) -> str | None:
        out = ran.folder / "out.jsonl"
        text = out.read_text() if out.is_file() else ""
        return "rows with wrong answers were written" if "WRONG" in text else None

    def nothing_suggested(ran: Ran) -> str | None:
        return "suggests fine-tuning on an empty file" if "fine-tune on it" in ran.output else None

    return [
        Case("export", "--min-reward nan", cli(*export, "--min-reward", "nan"), mention=("--min-reward",), files=base,
             check=wrong_rows),
        Case("export", "--min-reward inf", cli(*export, "--min-reward", "inf"), mention=("--min-reward",), files=base),
        Case("export", "--min-reward 2", cli(*export, "--min-reward", "2"), mention=("--min-reward",), files=base,
             check=nothing_suggested),
        Case("export", "-o a directory", cli("export-sft-data", "-c", "run.toml", "-o", "adir"),
             mention=("adir", "directory"), files={**base, "adir/.keep": ""}),
        Case("export", "--program missing", cli(*export, "--program", "gone.json"), mention=("gone.json",), files=base,
             check=lambda ran: "the path is printed twice" if ran.output.count("gone.json") > 1 else None),
        Case("export", "--program whose variables is a list", cli(*export, "--program", "p.json"),
             mention=("p.json", "variables"), files={**base, "p.json": json.dumps({"variables": [1, 2]})}),
        Case("export", "--min-reward 1 (control)", cli(*export, "--min-reward", "1"), expect="ok",
             mention=("rows",), files=base,
             check=lambda ran: None if 0 < rows_written(ran) and wrong_rows(ran) is None else "wrong rows"),
    ]


def ray_cases(server) -> list[Case]:
    """One run on a local Ray instance whose model needs the key model.api_key_env names (slow: Ray starts)."""
    model = served_model(server.mode_url("key", want="sk-fault-bench"), 'api_key_env = "FAULT_BENCH_KEY"\ncache = false\n')
    text = config(model=model, program='[program]\nfactory = "factories:served"\n')

    def no_401(ran: Ran) -> str | None:
        runs = list((ran.folder / "runs").glob("*/run.json"))
        status = json.loads(runs[0].read_text()) if runs else {}
        failures = status.get("lm_failures")
        return None if status.get("status") == "completed" and not failures else (
            f"status {status.get('status')}, {failures} LM failures (the workers' calls were refused)")

    return [Case("ray", "--backend ray with model.api_key_env", cli("train", "-c", "run.toml", "--yes", "--backend",
                                                                   "ray", "--workers", "1"),
                 expect="ok", files=files(text), env={"FAULT_BENCH_KEY": "sk-fault-bench"}, check=no_401, timeout=420)]


def cases(model: Path, server, only: set[str]) -> list[Case]:
    everything = [*sft_cases(model), *rl_cases(model), *registry_cases(), *runs_cases(), *export_cases(),
                  *(ray_cases(server) if "ray" in only else [])]
    for case in everything:  # each case its own registry of fine-tuned models, never the user's
        case.env = {"PROMPTGYM_MODELS_DIR": "{folder}/models", **case.env}
    return [case for case in everything if case.category in only]


# -- kill -9 mid-run, then resume ---------------------------------------------------------------


@dataclass
class WeightKill:
    name: str
    survived: bool
    steps_redone: int
    save_steps: int
    corrupt_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict:
        return {"name": self.name, "survived": self.survived, "steps_redone": self.steps_redone,
                "save_steps": self.save_steps, "corrupt_files": self.corrupt_files, "notes": "; ".join(self.notes)[:400]}


def corrupt_files(run: Path) -> list[str]:
    """Files of the run folder that don't read as what they are (hidden staging folders of a save are ignored)."""
    from safetensors import safe_open

    bad = []
    for path in sorted(run.rglob("*")):
        if not path.is_file() or any(part.startswith(".") for part in path.relative_to(run).parts):
            continue
        try:
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
            elif path.suffix == ".safetensors":
                with safe_open(str(path), "pt") as handle:
                    for key in handle.keys():
                        handle.get_tensor(key)
            elif path.name == "events.jsonl":
                lines = path.read_text(encoding="utf-8").split("\n")
                for line in lines[:-1]:  # a kill mid-write may leave the last line partial: resume starts a new one
                    if line.strip():
                        json.loads(line)
            elif path.suffix == ".csv":
                list(csv.reader(path.open(encoding="utf-8")))
        except Exception as error:  # noqa: BLE001 - any failure to read is corruption
            bad.append(f"{path.relative_to(run)}: {type(error).__name__}")
    return bad


def _events(run: Path, kind: str) -> list[dict]:
    path = run / "events.jsonl"
    if not path.is_file():
        return []
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == kind:
            found.append(event)
    return found


def _kill_and_resume(name: str, folder: Path, config_name: str, kind: str, key: str, total: int, save_steps: int,
                     kill_after: int, env: dict[str, str], lose_pointer: bool = False) -> WeightKill:
    process = subprocess.Popen([*TINY_CLI, "train", "-c", config_name, "--yes"], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 600
    run = None
    while time.time() < deadline and process.poll() is None:
        runs = [path for path in (folder / "runs").glob("*") if (path / "events.jsonl").is_file()]
        if runs and len(_events(runs[0], kind)) >= kill_after:
            run = runs[0]
            break
        time.sleep(0.05)
    if run is None:
        process.kill()
        return WeightKill(name, False, -1, save_steps, notes=[f"never reached {kind} {kill_after}: "
                                                                f"{(process.communicate()[0] or '')[-300:]}"])
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    time.sleep(1.5)  # the CLI-started task app notices its parent died and exits
    corrupt = corrupt_files(run)
    notes = []
    if lose_pointer:
        (run / "checkpoints" / "last.json").unlink(missing_ok=True)
        notes.append("checkpoints/last.json deleted before resuming")
    resumed = subprocess.run([*TINY_CLI, "train", "--resume", run.name, "--yes"], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=600)
    steps = [event[key] for event in _events(run, kind)]
    status = json.loads((run / "run.json").read_text())
    history = list(csv.DictReader((run / "history.csv").open())) if (run / "history.csv").is_file() else []
    history_steps = [int(row[key]) for row in history if row.get(key)]
    survived = (resumed.returncode == 0 and status.get("status") == "completed" and sorted(set(steps)) == list(
        range(1, total + 1)) and history_steps == list(range(1, total + 1)))
    if not survived:
        notes.append(f"resume exit {resumed.returncode}, status {status.get('status')}, history {history_steps}: "
                     f"{resumed.stdout[-300:]}")
    return WeightKill(name, survived, len(steps) - total, save_steps, corrupt, notes)


def kill_reports(model: Path) -> list[WeightKill]:
    reports = []
    for lose_pointer in (False, True):
        with tempfile.TemporaryDirectory(prefix="pgkill-") as tmp:
            folder = Path(tmp)
            write_files(folder, {"sft.toml": sft_toml(model, save_steps=4, validation_split=0),
                                 "train.jsonl": chat_rows(48)})
            env = base_env(folder)
            env["PROMPTGYM_MODELS_DIR"] = str(folder / "models")
            reports.append(_kill_and_resume("kill -9 mid-SFT" + (", last.json lost" if lose_pointer else ""), folder,
                                            "sft.toml", "sft_step", "step", 12, 4, 6, env, lose_pointer))
    with tempfile.TemporaryDirectory(prefix="pgkill-") as tmp:
        folder = Path(tmp)
        write_files(folder, {"rl.toml": rl_toml(model, iterations=8, save_steps=2)})
        env = {**base_env(folder), "PROMPTGYM_MODELS_DIR": str(folder / "models"), "TINY_DELAY_S": "0.3"}
        reports.append(_kill_and_resume("kill -9 mid-RL", folder, "rl.toml", "rl_iteration", "iteration", 8, 2, 3, env))
    return reports
