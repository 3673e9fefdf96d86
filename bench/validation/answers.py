"""What validating one model answer costs, on the answer schemas of the bundled tasks.

    PYTHONPATH=$PWD .venv/bin/python bench/validation/answers.py [--n 20000] [--out bench/results/answer_validation.json]

For each task's output DataModel, a valid answer (as the model's text) and an invalid one (a
required field missing), through: ``jsonschema`` (a compiled Draft 2020-12 validator, then
pydantic's ``model_validate`` to build the DataModel, as a Generator does), ``fastjsonschema``
(compiled to Python code, then ``model_validate``; skipped when it is not installed), and pydantic
alone (``model_validate`` on the parsed dict, and ``model_validate_json`` on the text). Microseconds
per answer, best of 5 runs of ``--n``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import jsonschema
import pydantic

TASKS = ["arithmetic", "boolq", "commonsense_qa", "dates", "gsm8k", "mmlu_topics", "nq_open"]


def instance(schema: dict[str, Any]) -> dict[str, Any]:
    """A valid value for an output schema (a string, number or boolean per field; enums take their first)."""
    props = schema.get("properties", {})
    out = {}
    for name, sub in props.items():
        sub = sub if "$ref" not in sub else schema["$defs"][sub["$ref"].split("/")[-1]]
        kind = sub.get("type") or (sub.get("anyOf") or [{}])[0].get("type", "string")
        out[name] = sub["enum"][0] if "enum" in sub else {"string": "x", "integer": 3, "number": 1.5,
                                                             "boolean": True, "array": []}.get(kind, "x")
    return out


def best_us(n: int, work: Callable[[], Any]) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            work()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return round(min(runs), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "answer_validation.json")
    args = parser.parse_args()
    try:
        import fastjsonschema
    except ImportError:
        fastjsonschema = None
    rows = []
    for task in TASKS:
        model = importlib.import_module(f"promptgym.datasets.{task}").get_output_data_model()
        schema = model.get_schema() if hasattr(model, "get_schema") else model.model_json_schema()
        good = instance(schema)
        bad = {key: value for key, value in good.items() if key not in schema.get("required", [])[:1]}
        for label, value in (("valid", good), ("invalid", bad)):
            text = json.dumps(value)
            validator = jsonschema.Draft202012Validator(schema)

            def with_jsonschema() -> Any:
                errors = list(validator.iter_errors(json.loads(text)))
                if errors:
                    return jsonschema.exceptions.best_match(errors).message
                return model.model_validate(json.loads(text))

            def pydantic_dict() -> Any:
                try:
                    return model.model_validate(json.loads(text))
                except pydantic.ValidationError as error:
                    return str(error)

            def pydantic_json() -> Any:
                try:
                    return model.model_validate_json(text)
                except pydantic.ValidationError as error:
                    return str(error)

            row = {"task": task, "answer": label, "fields": len(schema.get("properties", {})),
                   "jsonschema_then_pydantic_us": best_us(args.n, with_jsonschema),
                   "pydantic_us": best_us(args.n, pydantic_dict), "pydantic_json_us": best_us(args.n, pydantic_json)}
            if fastjsonschema is not None:
                compiled = fastjsonschema.compile(schema)

                def with_fastjsonschema() -> Any:
                    try:
                        compiled(json.loads(text))
                    except fastjsonschema.JsonSchemaException as error:
                        return error.message
                    return model.model_validate(json.loads(text))

                row["fastjsonschema_then_pydantic_us"] = best_us(args.n, with_fastjsonschema)
            rows.append(row)
            print(json.dumps(row))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "n": args.n, "cpus": os.cpu_count(),
            "load_avg_1m_end": round(os.getloadavg()[0], 2), "fastjsonschema": getattr(fastjsonschema, "VERSION", None)}
    args.out.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
