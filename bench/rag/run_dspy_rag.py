"""DSPy 3.4.1's RAG on the same corpus, embedder vectors and model, untrained and optimized (run in its venv).

    ~/.cache/promptgym-bench/venvs/dspy/bin/python bench/rag/run_dspy_rag.py --proxy-url http://127.0.0.1:8932 \
        --inputs dspy_inputs.json

``dspy.retrievers.Embeddings`` over the profiles, with an embedder that looks up the vectors promptgym's
embedder computed (``run.py`` writes them: the same vectors on both sides), the raw question as the query,
then ``dspy.Predict("context, question -> answer")`` with the ``JSONAdapter``, temperature 0, no cache, on the
counting proxy in front of llama_cpp.server. Optimized: ``BootstrapFewShot(max_bootstrapped_demos=2,
max_labeled_demos=0)`` on the train questions. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "peers"))

import dspy  # noqa: E402
import numpy as np  # noqa: E402
from corpus import correct  # noqa: E402
from dspy_local import local_lm  # noqa: E402


class RAG(dspy.Module):
    def __init__(self, search: dspy.retrievers.Embeddings) -> None:
        super().__init__()
        self.search = search
        self.respond = dspy.Predict("context: list[str], question: str -> answer: str")

    def forward(self, question: str) -> dspy.Prediction:
        found = self.search(question)
        prediction = self.respond(context=found.passages, question=question)
        prediction.indices = found.indices
        return prediction


def metric(example: dspy.Example, prediction: dspy.Prediction, trace: object = None) -> float:
    return float(correct(getattr(prediction, "answer", None), example.answer))


def evaluate(program: dspy.Module, examples: list[dspy.Example], gold: list[int]) -> tuple[list[float], list[float], int]:
    hits, recalled, failures = [], [], 0
    for example, index in zip(examples, gold):
        try:
            prediction = program(question=example.question)
            hits.append(metric(example, prediction))
            recalled.append(float(index in list(prediction.indices)))
        except Exception:  # noqa: BLE001 - a failed example scores 0, as in promptgym
            hits.append(0.0)
            recalled.append(0.0)
            failures += 1
    return hits, recalled, failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy-url", required=True)
    parser.add_argument("--inputs", required=True)
    args = parser.parse_args()
    given = json.loads(Path(args.inputs).read_text())
    vectors = given["vectors"]

    def embedder(texts: list[str]) -> np.ndarray:
        return np.asarray([vectors[text] for text in texts], dtype=np.float32)

    lm = local_lm(f"{args.proxy_url}/v1", "qwen2.5-coder-0.5b-instruct", structured=True, max_tokens=96)
    dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
    search = dspy.retrievers.Embeddings(corpus=given["corpus"], embedder=embedder, k=given["k"])
    position = {key: index for index, key in enumerate(given["ids"])}
    test = [dspy.Example(question=q["text"], answer=q["answer"]).with_inputs("question") for q in given["test"]]
    train = [dspy.Example(question=q["text"], answer=q["answer"]).with_inputs("question") for q in given["train"]]
    gold = [position[q["gold_id"]] for q in given["test"]]
    rag = RAG(search)
    row: dict = {"framework": "dspy", "dspy": dspy.__version__, "k": given["k"]}
    started, calls = time.perf_counter(), len(lm.history)
    hits, recalled, failures = evaluate(rag, test, gold)
    row["untrained"] = {"hits": hits, "accuracy": sum(hits) / len(hits), "recall": sum(recalled) / len(recalled),
                        "failures": failures, "lm_calls": len(lm.history) - calls,
                        "seconds": round(time.perf_counter() - started, 1)}
    started, calls = time.perf_counter(), len(lm.history)
    optimizer = dspy.BootstrapFewShot(metric=metric, max_bootstrapped_demos=2, max_labeled_demos=0, max_rounds=1)
    optimized = optimizer.compile(rag, trainset=train)
    row["training"] = {"lm_calls": len(lm.history) - calls, "seconds": round(time.perf_counter() - started, 1)}
    started, calls = time.perf_counter(), len(lm.history)
    hits, recalled, failures = evaluate(optimized, test, gold)
    row["optimized"] = {"hits": hits, "accuracy": sum(hits) / len(hits), "recall": sum(recalled) / len(recalled),
                        "failures": failures, "lm_calls": len(lm.history) - calls,
                        "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
