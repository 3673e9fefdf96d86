"""Does the way demonstrations are written into the prompt change what the embedded model does with them?

On mmlu_topics_200 (bench/training/data) the 0.5B model, shown the 3 training
questions nearest to each input, scored 27% with promptgym's first system message and
40% with DSPy's (the same neighbours and embedder); what this script found is why
Generator's system message changed (docs/benchmarks.md). This sends the same model, with the same
neighbours and the same JSON-schema constraint, several renderings of the prompt and
scores each on the first N test items of a task (``--task``, any task file there):

  promptgym        the messages promptgym's KNNFewShot program sends (captured, no model call): the current
                   system message; result files other than *_promptgym.json hold the first one's
  dspy_json        DSPy 3.4.1 JSONAdapter's messages for the same demonstrations (the DSPy venv formats them)
  pg_reminder      promptgym's, with the output fields restated after the input in the last message
  pg_plain_inputs  promptgym's, with inputs written as "question: ..." lines instead of a JSON object
  pg_inputs_schema promptgym's first system message, with the input fields described (``use_inputs_schema``;
                   the current message always describes them, so this rendering is only built for the first)
  dspy_system      DSPy's system message, then promptgym's turns
  dspy_turns       promptgym's system message, then DSPy's turns (their input headers and closing reminder)
  dspy_fields      DSPy's system message without its "structure" block (field lists and objective), promptgym's turns
  pg_structure     promptgym's system message plus DSPy's "structure" block, promptgym's turns
  pg_candidate     a fuller promptgym system message (fields with types and descriptions, the answer's JSON
                   shape with its allowed values, the instructions as the objective), promptgym's turns
  pg_candidate2    pg_candidate, with the allowed values restated as a rule ("must be exactly one of") and an
                   objective that names the fields ("Given `question`, produce `topic`.") before the instructions
  pg_candidate3    DSPy's system message laid out the same way (numbered fields with types, the input and output
                   structure, a note on the allowed values, the objective) but describing promptgym's JSON turns

Run: flock /tmp/promptgym-llm.lock .venv/bin/python bench/embedded/demo_rendering.py [--n 60] [--task T] [--only A,B]
(after ``bash bench/peers/setup.sh``). Writes bench/results/embedded_demo_rendering[_<task>][_<only>].json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import promptgym as pg
from promptgym.modules.generator import DEFAULT_INSTRUCTIONS
from promptgym.lm.local_models import DEFAULT_LOCAL_MODEL, ensure_local_model
from promptgym.stats import confidence_interval, paired_test
from promptgym.testing import ScriptedLanguageModel

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH / "training"))
from run_promptgym import bench_program, task_data_models  # noqa: E402

DSPY_PYTHON = Path(os.environ.get("PROMPTGYM_BENCH_HOME", Path.home() / ".cache/promptgym-bench")) / "venvs/dspy/bin/python"
DSPY_FORMAT = """
import json, sys, typing, dspy
task, cases = json.load(sys.stdin)
fin, fout = task["input"], task["output"]
kind = typing.Literal[tuple(fout["choices"])] if fout.get("choices") else str
sig = dspy.Signature({fin["name"]: (str, dspy.InputField(desc=fin["description"])),
                      fout["name"]: (kind, dspy.OutputField(desc=fout["description"]))})
out = [dspy.JSONAdapter().format(sig, [dspy.Example(**d).with_inputs(fin["name"]) for d in demos], inputs)
       for demos, inputs in cases]
print(json.dumps(out))
"""


async def promptgym_requests(task: dict, n: int) -> list:
    """The requests promptgym's KNNFewShot(k=3) program makes for the first n test inputs (a scripted model answers)."""
    data_in, data_out = task_data_models(task)
    fin, fout = task["input"]["name"], task["output"]["name"]
    lm = ScriptedLanguageModel(respond=lambda request: {fout: task["output"]["choices"][0]})
    program = await bench_program(lm, task)
    program.compile(reward=pg.rewards.ExactMatch(in_mask=[fout]), optimizer=pg.optimizers.KNNFewShot(k=3))
    xs = np.array([data_in(**{fin: r[fin]}) for r in task["train"]], dtype=object)
    ys = np.array([data_out(**{fout: r[fout]}) for r in task["train"]], dtype=object)
    await program.fit(xs, ys, epochs=1, validation_freq=2, verbose=0)
    for row in task["test"][:n]:  # one at a time, so the requests are in test order
        await program.predict(np.array([data_in(**{fin: row[fin]})], dtype=object), verbose=0)
    return lm.requests


def demos_of(messages: list[dict]) -> list[dict]:
    """The (input, output) pairs shown as user/assistant turns."""
    turns = messages[1:-1]
    return [{**json.loads(user["content"]), **json.loads(answer["content"])} for user, answer in zip(turns[::2], turns[1::2])]


def with_reminder(messages: list[dict], fout: str, choices: list[str] | None) -> list[dict]:
    last = dict(messages[-1])
    last["content"] += f"\n\nAnswer with a JSON object with the field `{fout}`" + (
        f": one of {', '.join(choices)}." if choices else ".")
    return [*messages[:-1], last]


def with_plain_inputs(messages: list[dict]) -> list[dict]:
    def plain(message: dict) -> dict:
        if message["role"] != "user":
            return message
        return {**message, "content": "\n".join(f"{k}: {v}" for k, v in json.loads(message["content"]).items())}
    return [messages[0], *(plain(m) for m in messages[1:])]


def with_inputs_schema(messages: list[dict], fin: str, description: str) -> list[dict]:
    system = messages[0]["content"].replace(
        "\n\nAnswer with", f"\n\nThe input is a JSON object with these fields:\n- {fin}: {description}\n\nAnswer with", 1)
    return [{**messages[0], "content": system}, *messages[1:]]


def dspy_system_parts(system: str) -> tuple[str, str, str]:
    """DSPy's system message as (field lists, "All interactions will be structured..." block, objective)."""
    structure, objective = system.index("All interactions will be structured"), system.index("In adhering to this structure")
    return system[:structure], system[structure:objective], system[objective:]


def candidate_system(task: dict, instructions: str) -> str:
    """A system message in promptgym's words that describes what DSPy's does (see pg_candidate)."""
    fin, fout = task["input"], task["output"]
    kind = "one of " + ", ".join(f'"{c}"' for c in fout["choices"]) if fout.get("choices") else "string"
    shape = "<" + ("one of: " + ", ".join(fout["choices"]) if fout.get("choices") else fout["name"]) + ">"
    return (f"Your input fields are:\n- `{fin['name']}` (string): {fin['description']}\n"
            f"Your output fields are:\n- `{fout['name']}` ({kind}): {fout['description']}\n\n"
            f"Each input is a JSON object with the input fields. Answer with a JSON object with the output fields, "
            f"exactly in this shape:\n{json.dumps({fout['name']: shape})}\n\n"
            f"Your objective: {instructions}")


def candidate2_system(task: dict, instructions: str) -> str:
    """pg_candidate with an exact-values rule and an objective that names the fields."""
    fin, fout = task["input"], task["output"]
    base = candidate_system(task, instructions).rsplit("\n\nYour objective: ", 1)[0]
    rule = (f"\nThe value of `{fout['name']}` must be exactly one of: {', '.join(fout['choices'])} (nothing else)."
            if fout.get("choices") else "")
    return f"{base}{rule}\n\nYour objective: given `{fin['name']}`, produce `{fout['name']}`. {instructions}"


def candidate3_system(task: dict, instructions: str) -> str:
    """DSPy's layout (numbered typed fields, structure, note, objective) describing promptgym's JSON turns."""
    fin, fout = task["input"], task["output"]
    kind = f"one of {fout['choices']}" if fout.get("choices") else "str"
    note = (f"  # the value must match exactly (no extra characters) one of: {'; '.join(fout['choices'])}"
            if fout.get("choices") else "")
    return (f"Your input fields are:\n1. `{fin['name']}` (str): {fin['description']}\n"
            f"Your output fields are:\n1. `{fout['name']}` ({kind}): {fout['description']}\n"
            "All interactions will be structured in the following way, with the appropriate values filled in.\n\n"
            f"Inputs will be a JSON object:\n\n{{\"{fin['name']}\": \"{{{fin['name']}}}\"}}\n\n"
            f"Outputs will be a JSON object with the following fields.\n\n"
            f"{{\n  \"{fout['name']}\": \"{{{fout['name']}}}\"{note}\n}}\n"
            f"In adhering to this structure, your objective is: given the field `{fin['name']}`, produce the field "
            f"`{fout['name']}`. {instructions}")


def run(llm, renderings: list[list[dict]], schema: dict, fout: str, targets: list[str]) -> dict:
    started, hits, predictions = time.perf_counter(), [], []
    for messages, target in zip(renderings, targets):
        reply = llm.create_chat_completion(messages=messages, temperature=0.0, max_tokens=64,
                                           response_format={"type": "json_object", "schema": schema})
        try:
            value = json.loads(reply["choices"][0]["message"]["content"]).get(fout)
        except (json.JSONDecodeError, AttributeError):
            value = None
        predictions.append(value)
        hits.append(int(value == target))
    return {"correct": sum(hits), "n": len(hits), "seconds_per_call": round((time.perf_counter() - started) / len(hits), 2),
            "hits": hits, "predictions": predictions}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--task", default="mmlu_topics_200")
    parser.add_argument("--only", default="", help="comma-separated renderings to score next to promptgym's")
    args = parser.parse_args()
    task = json.loads((BENCH / "training" / "data" / f"{args.task}.json").read_text())
    fin, fout, choices = task["input"]["name"], task["output"]["name"], task["output"].get("choices")
    requests = await promptgym_requests(task, args.n)
    ours = [request.messages for request in requests]
    cases = [(demos_of(m), {fin: row[fin]}) for m, row in zip(ours, task["test"])]
    dspy = json.loads(subprocess.run([str(DSPY_PYTHON), "-c", DSPY_FORMAT], input=json.dumps([task, cases]), text=True,
                                     capture_output=True, check=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}).stdout)
    renderings = {"promptgym": ours, "dspy_json": dspy, "pg_reminder": [with_reminder(m, fout, choices) for m in ours],
                  "pg_plain_inputs": [with_plain_inputs(m) for m in ours],
                  "dspy_system": [[d[0], *m[1:]] for d, m in zip(dspy, ours)],
                  "dspy_turns": [[m[0], *d[1:]] for d, m in zip(dspy, ours)]}
    if "\n\nAnswer with" in ours[0][0]["content"]:  # the first system message; the current one describes the inputs
        renderings["pg_inputs_schema"] = [with_inputs_schema(m, fin, task["input"]["description"]) for m in ours]
    parts = [dspy_system_parts(d[0]["content"]) for d in dspy]
    renderings["dspy_fields"] = [[{"role": "system", "content": fields + objective}, *m[1:]]
                                 for (fields, _, objective), m in zip(parts, ours)]
    renderings["pg_structure"] = [[{"role": "system", "content": m[0]["content"] + "\n\n" + structure.strip()}, *m[1:]]
                                  for (_, structure, _), m in zip(parts, ours)]
    instructions = DEFAULT_INSTRUCTIONS
    renderings["pg_candidate"] = [[{"role": "system", "content": candidate_system(task, instructions)}, *m[1:]]
                                  for m in ours]
    renderings["pg_candidate2"] = [[{"role": "system", "content": candidate2_system(task, instructions)}, *m[1:]]
                                   for m in ours]
    renderings["pg_candidate3"] = [[{"role": "system", "content": candidate3_system(task, instructions)}, *m[1:]]
                                   for m in ours]
    if args.only:
        unknown = sorted(set(args.only.split(",")) - set(renderings))
        if unknown:
            raise SystemExit(f"no rendering {unknown} with this system message; there are: {', '.join(renderings)}")
        renderings = {name: renderings[name] for name in ["promptgym", *args.only.split(",")]}
    from llama_cpp import Llama

    llm = Llama(model_path=str(ensure_local_model(DEFAULT_LOCAL_MODEL)), n_ctx=4096, n_threads=2, verbose=False)
    targets = [row[fout] for row in task["test"][:args.n]]
    results = {}
    for name, messages in renderings.items():
        results[name] = run(llm, messages, requests[0].schema, fout, targets)
        interval = confidence_interval(results[name]["hits"])
        print(f"{name:16s} {results[name]['correct']}/{args.n} = {interval}  {results[name]['seconds_per_call']} s/call",
              flush=True)
    for name in renderings:
        if name != "promptgym":
            print(f"{name} vs promptgym: {paired_test(results['promptgym']['hits'], results[name]['hits'])}")
    suffix = "" if args.task == "mmlu_topics_200" else f"_{args.task}"
    out = BENCH / "results" / f"embedded_demo_rendering{suffix}{'_' + args.only.replace(',', '_') if args.only else ''}.json"
    out.write_text(json.dumps({"task": args.task, "n": args.n, "model": DEFAULT_LOCAL_MODEL, "results": results,
                               "example_messages": {name: m[0] for name, m in renderings.items()}}, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
