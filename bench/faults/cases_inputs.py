"""Bad configs, data files and CLI usage: each should be a clear error (exit 2) or be accepted."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from common import Case, Ran, cli
from configs import DATA_SECTION, GENERATOR_PROGRAM, SCRIPTED_PROGRAM, TRAINING, config, files
from factories import data_lines

DRY = ("train", "-c", "run.toml", "--dry-run")
TRAIN = ("train", "-c", "run.toml", "--yes")


def swap(old: str, new: str, base: str | None = None) -> str:
    text = base or config()
    assert old in text, old
    return text.replace(old, new)


def config_cases() -> list[Case]:
    dates = config(program=GENERATOR_PROGRAM.replace('inputs = { question = "A question" }\noutputs = { answer = "The answer" }\n', ""),
                   data='[data]\ndataset = "dates"\ndataset_args = { n_train = -5 }\n')
    cases = [
        ("non_utf8_config", {"run.toml": config().encode() + b'\n# caf\xe9 \xff\n'}, ("run.toml", "UTF-8")),
        ("invalid_toml", {"run.toml": "[job\nname = 1\n"}, ("run.toml",)),
        ("unknown_key", files(swap("epochs = 2", "epochs = 2\nbatch_sise = 3")), ("batch_sise",)),
        ("wrong_type", files(swap("epochs = 2", 'epochs = "two"')), ("epochs",)),
        ("negative_epochs", files(swap("epochs = 2", "epochs = -1")), ("epochs",)),
        ("dataset_args_negative", files(dates), ("n_train",)),
        ("dataset_args_unknown", files(dates.replace("n_train = -5", "bogus = 1")), ("bogus",)),
        ("dataset_args_wrong_type", files(dates.replace("n_train = -5", 'n_train = "ten"')), ("n_train",)),
        ("dataset_unknown", files(dates.replace('"dates"', '"nope"')), ("nope",)),
        ("factory_not_a_program", files(swap("factories:scripted", "factories:not_a_program")), ("factory", "Program")),
        ("factory_raises", files(swap("factories:scripted", "factories:raising")), ("factory", "could not build")),
        ("factory_module_missing", files(swap("factories:scripted", "nomodule:build")), ("factory", "nomodule")),
        ("factory_function_missing", files(swap("factories:scripted", "factories:absent")), ("factory", "absent")),
        ("factory_not_callable", files(swap("factories:scripted", "factories:NOT_CALLABLE")), ("factory",)),
        ("factory_bad_args", files(swap('factory = "factories:scripted"', 'factory = "factories:scripted"\nfactory_args = { colour = 1 }')), ("factory", "colour")),
        ("program_path_missing", files(config(program='[program]\npath = "absent.json"\n')), ("program.path", "absent.json")),
        ("program_path_not_json", {**files(config(program='[program]\npath = "p.json"\n')), "p.json": "not json"}, ("p.json",)),
        ("program_path_directory", {**files(config(program='[program]\npath = "sub"\n')), "sub/x": ""}, ("program.path",)),
        ("program_path_other_json", {**files(config(program='[program]\npath = "p.json"\n')), "p.json": "[1, 2]"}, ("p.json",)),
        ("model_name_empty", files(config(model='[model]\nname = ""\n', program=GENERATOR_PROGRAM)), ("model.name",)),
        ("model_api_base_ftp", files(config(model='[model]\nname = "openai/x"\napi_base = "ftp://127.0.0.1/v1"\n', program=GENERATOR_PROGRAM)), ("api_base", "ftp://")),
        ("model_api_base_no_scheme", files(config(model='[model]\nname = "openai/x"\napi_base = "localhost:8080"\n', program=GENERATOR_PROGRAM)), ("api_base",)),
        ("max_tokens_zero", files(config(model="[model]\nmax_tokens = 0\n")), ("max_tokens",)),
        ("validation_split_too_big", files(swap("validation_split = 0.25", "validation_split = 1.5")), ("validation_split",)),
        ("two_data_sources", files(swap('train = "train.jsonl"', 'train = "train.jsonl"\ndataset = "dates"')), ("data",)),
        ("no_data_section", files(config(data="")), ("data",)),
        ("reward_unknown", files(config(extra='[reward]\nname = "nope"\n')), ("reward", "nope")),
        ("optimizer_unknown", files(swap('name = "randomfewshot"', 'name = "nope"')), ("optimizer", "nope")),
        ("optimizer_bad_param", files(swap("nb_max_examples = 2", 'nb_max_examples = "x"')), ("nb_max_examples",)),
        ("metric_unknown", files(config(extra='[[metrics]]\nname = "nope"\n')), ("metrics", "nope")),
        ("field_type_unknown", files(config(model='[model]\nname = "openai/x"\napi_base = "http://127.0.0.1:9/v1"\n',
                                            program=GENERATOR_PROGRAM.replace('"The answer"', '{ type = "dict" }'))), ("type",)),
        ("negative_seed", files(swap('name = "fault"', 'name = "fault"\nseed = -1')), ("seed",)),
        ("empty_config", {"run.toml": ""}, ("data",)),
    ]
    found = [Case("config", name, cli(*DRY), files=f, mention=m) for name, f, m in cases]
    found += [
        Case("config", "config_missing", cli("train", "-c", "absent.toml", "--dry-run"), mention=("absent.toml",)),
        Case("config", "config_is_directory", cli("train", "-c", "sub", "--dry-run"), files={"sub/x": ""}, mention=("sub",)),
        Case("config", "env_file_missing", cli(*DRY, "--env-file", "absent.env"), files=files(config()), mention=("absent.env",)),
        Case("config", "examples_zero", cli(*DRY, "--examples", "0"), files=files(config()), mention=("examples",)),
        Case("config", "stream_format_bogus", cli(*TRAIN, "--stream-format", "bogus"), files=files(config()), mention=("stream-format",)),
    ]
    return found


def data_cases() -> list[Case]:
    good = data_lines()
    csv_config = swap('train = "train.jsonl"', 'train = "train.csv"')
    cases = [
        ("jsonl_not_utf8", good.encode() + b'{"prompt": "caf\xe9", "label": "X"}\n', "error", ("train.jsonl", "line 13")),
        ("jsonl_bom", "\ufeff" + good, "ok", ()),
        ("jsonl_bad_line", good.replace('"cat"', '"cat', 1), "error", ("train.jsonl", "line 2")),
        ("jsonl_array_line", good + "[1, 2]\n", "error", ("train.jsonl", "line 13")),
        ("jsonl_empty", "", "error", ("train.jsonl",)),
        ("jsonl_missing_field", good + '{"prompt": "x"}\n', "error", ("line 13", "label")),
        ("jsonl_wrong_type", good + '{"prompt": 5, "label": "X"}\n', "error", ("line 13", "question")),
        ("jsonl_blank_lines", good.replace("\n", "\n\n"), "ok", ()),
        ("jsonl_raw_nul_byte", good + '{"prompt": "a\u0000b", "label": "X"}\n', "error", ("train.jsonl", "line 13")),
        ("jsonl_escaped_nul", good + '{"prompt": "a\\u0000b", "label": "X"}\n', "ok", ()),
        ("jsonl_one_example", good.splitlines()[0] + "\n", "ok", ()),
    ]
    found = [Case("data", name, [*cli(*DRY)], expect=expect, files=files(config(), data), mention=mention)
             for name, data, expect, mention in cases]
    csv_good = "prompt,label\n" + "".join(f"{w},{w.upper()}\n" for w in ["ab", "cat", "house", "tree", "sky", "door"])
    found += [
        Case("data", "csv_bom", cli(*DRY), expect="ok", files={**files(csv_config), "train.csv": "\ufeff" + csv_good}),
        Case("data", "csv_missing_column", cli(*DRY), files={**files(csv_config), "train.csv": csv_good.replace("label", "lbl")},
             mention=("train.csv", "label")),
        Case("data", "csv_not_utf8", cli(*DRY), files={**files(csv_config), "train.csv": csv_good.encode() + b"caf\xe9,X\n"},
             mention=("train.csv", "UTF-8")),
        Case("data", "jsonl_gz_corrupt", cli(*DRY), files={**files(swap("train.jsonl", "train.jsonl.gz")), "train.jsonl.gz": b"garbage"},
             mention=("train.jsonl.gz",)),
        Case("data", "train_is_directory", cli(*DRY), files={**files(swap("train.jsonl", "sub")), "sub/x": ""}, mention=("data.train",)),
        Case("data", "validation_file_missing", cli(*DRY), files=files(swap('validation_split = 0.25', 'validation = "absent.jsonl"')),
             mention=("absent.jsonl",)),
    ]
    return found


def env_file_check(ran: Ran) -> str | None:
    runs = list((ran.folder / "runs").glob("*/config.toml"))
    if not runs:
        return "no run folder"
    text = runs[0].read_text()
    if "sk-fault-secret-1234" in ran.output or any("sk-fault-secret-1234" in p.read_text(errors="replace")
                                                  for p in runs[0].parent.rglob("*") if p.is_file()):
        return "the secret leaked"
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return f"config.toml is not TOML any more: {error}"
    if "n_test" in text and "****" in text:
        return "a key was masked"
    if "resumed-ok" not in ran.output:
        return "resume failed: " + ran.output[-300:]
    return None


ENV_SCRIPT = """
set -e
$PYTHON -m promptgym.cli.main train -c run.toml --env-file .env --yes >out1.txt 2>&1 || { cat out1.txt; exit 1; }
cat out1.txt
run=$(ls runs)
$PYTHON - "$run" <<'PY'
import json, sys
path = f"runs/{sys.argv[1]}/run.json"
status = json.load(open(path)); status["status"] = "interrupted"; json.dump(status, open(path, "w"))
PY
$PYTHON -m promptgym.cli.main train --resume "$run" --yes && echo resumed-ok
"""


def on_run(arguments: str) -> list[str]:
    """A CLI command on the one run of the case's folder."""
    return ["bash", "-c", f'"$PYTHON" -m promptgym.cli.main {arguments}'.replace("RUN", "$(ls runs)")]


def cli_cases() -> list[Case]:
    env = "OPENAI_API_KEY=sk-fault-secret-1234\nDEBUG=true\nREGION=test\nN=1\nMODE=train\n"
    env_config = config(model='[model]\nname = "local/qwen2.5-coder-0.5b-instruct"\napi_key_env = "OPENAI_API_KEY"\n',
                        extra='[reward]\nname = "exactmatch"\n')
    completed_check = lambda ran: None  # noqa: E731

    def resume_dry_check(ran: Ran) -> str | None:
        run = next((ran.folder / "runs").iterdir())
        status = json.loads((run / "run.json").read_text())
        return "the dry run trained the run" if status.get("status") == "completed" else None

    return [
        Case("cli", "env_file_common_words", ["bash", "-c", ENV_SCRIPT], expect="ok", check=env_file_check,
             files={**files(env_config), ".env": env}, timeout=120),
        Case("cli", "resume_dry_run", on_run("train --resume RUN --dry-run"),
             expect="ok", check=resume_dry_check, prepare=interrupted_run, files=files(config())),
        Case("cli", "resume_with_config", on_run("train --resume RUN -c run.toml --yes"),
             mention=("--config",), prepare=interrupted_run, files=files(config())),
        Case("cli", "resume_with_seed", on_run("train --resume RUN --seed 3 --yes"),
             mention=("--seed",), prepare=interrupted_run, files=files(config())),
        Case("cli", "resume_unknown", cli("train", "--resume", "nope"), mention=("nope",)),
        Case("cli", "resume_completed", on_run("train --resume RUN --yes"),
             mention=("completed",), prepare=completed_run, files=files(config())),
        Case("cli", "runs_show_corrupt", on_run("runs show RUN"),
             mention=("run.json",), prepare=lambda folder: corrupt(folder, "run.json", "{not json"), files=files(config())),
        Case("cli", "runs_watch_corrupt_event", on_run("runs watch RUN"),
             expect="ok", check=completed_check, mention=("line",),
             prepare=lambda folder: corrupt(folder, "events.jsonl", "{broken\n", append=True), files=files(config())),
        Case("cli", "runs_list_corrupt", cli("runs", "list"), expect="ok",
             prepare=lambda folder: corrupt(folder, "run.json", "{not json"), files=files(config())),
    ]


def completed_run(folder: Path) -> None:
    from common import base_env, run_command

    ran = run_command(cli(*TRAIN), folder, base_env(folder), 120)
    assert ran.code == 0, ran.output


def interrupted_run(folder: Path) -> None:
    completed_run(folder)
    run = next((folder / "runs").iterdir())
    status = json.loads((run / "run.json").read_text())
    status.update(status="interrupted", epochs_done=1)
    (run / "run.json").write_text(json.dumps(status))
    (run / "summary.md").unlink()
    (run / "checkpoints" / "epoch_1.json").replace(run / "checkpoints" / "last.json")


def corrupt(folder: Path, name: str, text: str, append: bool = False) -> None:
    completed_run(folder)
    path = next((folder / "runs").iterdir()) / name
    path.write_text((path.read_text() if append else "") + text)


def cases() -> list[Case]:
    return [*config_cases(), *data_cases(), *cli_cases()]


__all__ = ["cases", "DATA_SECTION", "SCRIPTED_PROGRAM", "TRAINING"]
