"""RAG on a generated corpus: closed-book, RAG untrained, RAG trained, the oracle passage, and DSPy's RAG,
with the same model, embedder and items, in one run.

The task (``corpus.py``): a few thousand profiles of fictional people with near-duplicate names and shared
attributes; each question asks one attribute of one person, the answer a word or two of that profile.
Closed-book is near 0 by construction; the oracle arm (the gold profile in the input) is the ceiling. Arms:

  closed_book      Generator on the question alone
  oracle           Generator on the question and the gold profile
  rag_untrained    Input -> RetrieveKnowledge(k, hybrid_fts) -> Generator; the search is what the LM writes
                   (--search writer, two model calls per answer) or the question itself (--search input, one)
  rag_trained      the same after ``fit`` with --optimizer (default RandomFewShot, 2 demonstrations)
  rag_tuned        the same after ``fit`` with ``Sequence([FineTune(target="embedder"), --optimizer])``: the
                   retriever's query embedder (BitFit on e5's query side; the documents keep their vectors)
                   trained contrastively from the program's own runs, then the prompts
  dspy_untrained   ``dspy.retrievers.Embeddings`` (the same embedder's vectors, the raw question) + ``dspy.Predict``
  dspy_optimized   the same after BootstrapFewShot (with random search over more candidates when that is what
                   it takes for DSPy's training to make no fewer model calls than ours, counted at the wire)

Retrieval recall@k of the knowledge base on the raw question (similarity and hybrid) is reported too, and
with the tuned query side against the untuned one (``recall_tuned``, paired).
Accuracy with 95% intervals, paired tests, LM calls; written to --out after each arm.

    PYTHONPATH=. flock /tmp/promptgym-llm.lock .venv/bin/python bench/rag/run.py --profiles 2000 --test 100 --train 24
    PYTHONPATH=. .venv/bin/python bench/rag/run.py --scripted --profiles 200 --test 20 --no-dspy     # the harness, no model

``--scripted --e5 --queries FILE`` replays the search queries ``lm_queries.py`` saved from the embedded model (so
the embedder's tuning sees the rows the real program mines, in minutes); ``--tuning JSON`` passes options to
``FineTune(target="embedder")``; ``--resume`` keeps the arms an earlier run of the same setup measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import promptgym as pg
from promptgym.knowledge_bases import KnowledgeBase
from promptgym.modules.variable import variable_values
from promptgym.stats import confidence_interval, paired_test
from promptgym.testing import HashEmbeddingModel, ScriptedLanguageModel, last_user_json

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from corpus import Profile, Question, correct, profiles, questions  # noqa: E402
from peers.dspy_arm import run_dspy_script  # noqa: E402

RESULTS = HERE.parent / "results" / "rag.json"
MODEL_NAME = "qwen2.5-coder-0.5b-instruct"
EMBEDDER = "local/multilingual-e5-small"


class Query(pg.DataModel):
    question: str = pg.Field(description="A question about one person")


class WithPassage(pg.DataModel):
    question: str = pg.Field(description="A question about one person")
    passage: str = pg.Field(description="The profile of that person")


class Answer(pg.DataModel):
    answer: str = pg.Field(description="The short answer: a few words, copied from the passage")


class Person(pg.DataModel):
    id: str = pg.Field(description="The person's key")
    name: str = pg.Field(description="The person's full name")
    text: str = pg.Field(description="The person's profile")


async def answer_reward(y_true: Any, y_pred: Any) -> float:
    return float(correct((y_pred or {}).get("answer") if y_pred is not None else None, y_true.get("answer")))


def scripted_reader(queries: dict[str, list[str]] | None = None) -> ScriptedLanguageModel:
    """A model for the harness: writes the question as the search (or the queries ``queries`` holds for it,
    as ``lm_queries.py`` saved them from the embedded model), reads the answer off the first passage that
    names the person asked about (so RAG scores its retrieval, the oracle 1.0, closed-book 0)."""
    patterns = {"born": r"born in ([^.]+)\.", "trade": r"is an? (.+?) born", "instrument": r"plays the (\S+)",
                "pet": r"named (\w+)"}

    def respond(request: Any) -> Any:
        given = last_user_json(request)
        if "search" in (request.schema or {}).get("properties", {}):
            question = given["question"]
            return {"tables": ["Person"], "search": queries.get(question, [question]) if queries else [question]}
        question = given["question"]
        name = re.search(r"(?:born\?|of |does |of )?([A-Z][a-z]+(?: [A-Z]\.)? [A-Z][a-z]+)", question)
        passages = [given["passage"]] if "passage" in given else [row.get("text", "") for row in given.get("result", [])]
        kind = next((key for key in patterns if key in question or (key == "pet" and "pet" in question)), "born")
        kind = "trade" if "trade" in question else "instrument" if "instrument" in question else kind
        for passage in passages:
            if name and passage.startswith(name[1] + " "):
                found = re.search(patterns[kind], passage)
                if found:
                    return {"answer": found[1]}
        return {"answer": "unknown"}

    return ScriptedLanguageModel(respond=respond)


def as_data(asked: list[Question], people: dict[str, Profile], oracle: bool = False) -> tuple[np.ndarray, np.ndarray]:
    inputs = [WithPassage(question=q.text, passage=people[q.gold_id].text) if oracle else Query(question=q.text)
              for q in asked]
    return np.array(inputs, dtype=object), np.array([Answer(answer=q.answer) for q in asked], dtype=object)


async def build_knowledge_base(folder: Path, people: list[Profile], embedder: Any) -> KnowledgeBase:
    """The profiles in ``folder/rag.db``; a file that already holds exactly these profiles is reused."""
    kb = KnowledgeBase(uri=str(folder / "rag.db"), data_models=[Person], embedding_model=embedder)
    held = await kb.count(table_name="Person") if kb.get_symbolic_data_models() else 0
    if held == len(people) and all(row is not None and row.get("text") == person.text for row, person in
                                   zip(await kb.get([p.id for p in people], table_name="Person"), people)):
        return kb  # built by an earlier run (--kb-dir): the same profiles, so the same vectors
    for start in range(0, len(people), 256):
        await kb.update([Person(id=p.id, name=p.name, text=p.text) for p in people[start:start + 256]])
    await kb.adapter.refresh_fulltext_index(table_name="Person")
    return kb


async def recall_at_k(kb: KnowledgeBase, asked: list[Question], k: int) -> dict[str, Any]:
    """Whether the gold profile is in the top ``k`` for the raw question, per search type."""
    found: dict[str, Any] = {}
    for kind in ("similarity", "hybrid_fts", "fulltext"):
        if kind != "fulltext" and kb.embedding_model is None:
            continue
        search = getattr(kb, f"{kind}_search")
        hits = [float(any(row["id"] == q.gold_id for row in await search(q.text, table_name="Person", k=k)))
                for q in asked]
        interval = confidence_interval(hits)
        found[kind] = {"recall": sum(hits) / len(hits), "interval": [interval.low, interval.high], "hits": hits}
    return found


def build_programs(lm: Any, kb: KnowledgeBase, k: int, search: str = "writer") -> dict[str, pg.Program]:
    tables = [model for model in kb.get_symbolic_data_models() if model.get_schema().get("title") == "Person"]
    closed = pg.Sequential([pg.Input(data_model=Query), pg.Generator(data_model=Answer, language_model=lm,
                                                                     name="answerer")], name="closed_book")
    oracle = pg.Sequential([pg.Input(data_model=WithPassage), pg.Generator(data_model=Answer, language_model=lm,
                                                                           name="answerer")], name="oracle")
    retriever = pg.RetrieveKnowledge(knowledge_base=kb, language_model=lm if search == "writer" else None,
                                     data_models=tables,
                                     search_type="hybrid_fts", k=k, return_query=False, name="retriever")
    rag = pg.Sequential([pg.Input(data_model=Query), retriever,
                         pg.Generator(data_model=Answer, language_model=lm, name="answerer")], name="rag")
    return {"closed_book": closed, "oracle": oracle, "rag": rag}


async def fit_arm(program: pg.Program, lm: Any, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Train ``program``: its LM calls, seconds, each epoch's logs (the validation scores), and what the fit
    said of a candidate against the start where its optimizer reports it (``history.comparisons``)."""
    started, before = time.perf_counter(), calls_of(lm)
    history = await program.fit(x, y, epochs=1, batch_size=8, validation_split=0.25, verbose=0)
    verdicts = [{key: value for key, value in comparison.items() if key in ("stage", "kept", "verdict", "reason")}
                for comparison in getattr(history, "comparisons", [])]
    return {"lm_calls": calls_of(lm) - before, "seconds": round(time.perf_counter() - started, 1),
            "epochs": history.as_rows(), "comparisons": verdicts}


async def adapter_recall(retriever: Any, asked: list[Question], k: int) -> dict[str, Any]:
    """recall@k of the gold profile for the raw question through the retriever's search, per search type, with
    the retriever's query side as built (the knowledge base's embedder, no adapter) and as tuned (the tuned
    query embedder and/or the query adapter, whichever ``EmbedderTuning`` kept), and the paired test."""
    found: dict[str, Any] = {}
    tuned = {retriever.query_adapter.name: retriever.query_adapter.value,
             retriever.query_embedder.name: retriever.query_embedder.value}
    base = {retriever.query_adapter.name: {"matrix": None}, retriever.query_embedder.name: {"model": None}}
    for kind in ("similarity", "hybrid_fts"):
        settings = {retriever.settings.name: {**retriever.settings.value, "search_type": kind, "k": k}}
        found[kind] = {}
        for label, query_side in (("identity", base), ("tuned", tuned)):
            with variable_values({**settings, **query_side}):
                hits = [float(any(row["id"] == q.gold_id for row in await retriever.search([q.text]))) for q in asked]
            interval = confidence_interval(hits)
            found[kind][label] = {"recall": sum(hits) / len(hits), "interval": [interval.low, interval.high],
                                  "hits": hits}
        found[kind]["paired"] = str(paired_test(found[kind]["identity"]["hits"], found[kind]["tuned"]["hits"]))
    found["adapter_kept"] = retriever.query_adapter.value.get("matrix") is not None
    found["embedder_kept"] = retriever.query_embedder.value.get("model")
    return found


def calls_of(lm: Any) -> int:
    return lm.usage.total().calls


async def score(program: pg.Program, lm: Any, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    before, started = calls_of(lm), time.perf_counter()
    evaluation = await program.evaluate(x, y, batch_size=8, verbose=0)
    interval = evaluation.interval()
    return {"accuracy": evaluation["reward"], "interval": [interval.low, interval.high],
            "hits": [float(value or 0.0) for value in evaluation.scores["reward"]],
            "lm_calls": calls_of(lm) - before, "seconds": round(time.perf_counter() - started, 1)}


async def dspy_inputs(path: Path, people: list[Profile], test: list[Question], train: list[Question],
                      embedder: Any, k: int) -> None:
    """What DSPy's arm needs: the corpus and the questions with this embedder's vectors (the same vectors)."""
    texts = [person.text for person in people]
    asked = [q.text for q in [*test, *train]]
    vectors = np.asarray(await embedder([*texts, *asked]), dtype=np.float32)
    path.write_text(json.dumps({
        "k": k, "corpus": texts, "ids": [person.id for person in people],
        "vectors": {text: [round(float(v), 6) for v in vector] for text, vector in zip([*texts, *asked], vectors)},
        "test": [q.__dict__ for q in test], "train": [q.__dict__ for q in train]}))


def run_dspy(inputs: Path, args: argparse.Namespace, min_calls: int) -> dict[str, Any]:
    """DSPy's arms against llama_cpp.server (same gguf) behind the counting proxy (bench/peers/dspy_arm.py)."""
    return run_dspy_script(HERE / "run_dspy_rag.py", ["--inputs", str(inputs), "--min-calls", str(min_calls)],
                           timeout=args.dspy_timeout, log_name="rag")


ARMS = ("closed_book", "oracle", "rag_untrained", "rag_tuned", "dspy_untrained", "rag_trained")
"""The arms in the order a run measures them; --resume keeps each one (with what was measured beside it)."""
BESIDE = {"rag_tuned": ("rag_tuned_training", "embedder_tuning", "recall_tuned"),
          "dspy_untrained": ("dspy", "dspy_optimized"), "rag_trained": ("rag_training",)}
SETUP = ("model", "embedder", "profiles", "test_items", "train_items", "k", "optimizer", "search", "queries",
         "tuning")


def resumable(out: Path, report: dict[str, Any]) -> dict[str, Any]:
    """The finished arms of an earlier run in ``out`` with the same setup as ``report`` (none otherwise), each
    with what was measured beside it; an arm that ended in an error is run again."""
    if not out.exists():
        return {}
    earlier = json.loads(out.read_text())
    if any(earlier.get(key) != report.get(key) for key in SETUP):
        print(f"{out} was measured with another setup: not resuming from it", flush=True)
        return {}
    kept: dict[str, Any] = {"earlier_commands": [*earlier.get("earlier_commands", []), earlier.get("command")]}
    for arm in ARMS:
        if "hits" in earlier.get(arm, {}):
            kept[arm] = earlier[arm]
            kept.update({key: earlier[key] for key in BESIDE.get(arm, ()) if key in earlier})
    return kept if len(kept) > 1 else {}


def summarize(report: dict[str, Any]) -> None:
    """Paired tests between the arms, and how much of the closed-book -> oracle gap trained RAG closes."""
    pairs = [("closed_book", "rag_untrained"), ("rag_untrained", "rag_trained"), ("rag_trained", "oracle"),
             ("dspy_untrained", "dspy_optimized"), ("dspy_optimized", "rag_trained"),
             ("dspy_untrained", "rag_untrained"), ("rag_trained", "rag_tuned"), ("dspy_optimized", "rag_tuned"),
             ("rag_tuned", "oracle")]
    report["paired"] = {f"{b} vs {a}": str(paired_test(report[a]["hits"], report[b]["hits"]))
                        for a, b in pairs if "hits" in report.get(a, {}) and "hits" in report.get(b, {})}
    if all("accuracy" in report.get(arm, {}) for arm in ("closed_book", "oracle", "rag_trained")):
        gap = report["oracle"]["accuracy"] - report["closed_book"]["accuracy"]
        report["gap_closed"] = None if gap <= 0 else \
            round((report["rag_trained"]["accuracy"] - report["closed_book"]["accuracy"]) / gap, 3)
        if "accuracy" in report.get("rag_tuned", {}):
            report["gap_closed_tuned"] = None if gap <= 0 else \
                round((report["rag_tuned"]["accuracy"] - report["closed_book"]["accuracy"]) / gap, 3)


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--test", type=int, default=100)
    parser.add_argument("--train", type=int, default=24)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--optimizer", default="randomfewshot", help="a name promptgym.optimizers.get knows")
    parser.add_argument("--scripted", action="store_true", help="scripted reader and hash embedder: the harness")
    parser.add_argument("--e5", action="store_true", help="with --scripted: the real embedder (retrieval is real, "
                        "the reader scripted: the arms then measure retrieval alone)")
    parser.add_argument("--queries", default=None, help="with --scripted: the search queries to write per question "
                        "(a JSON object question -> list, from lm_queries.py), not the question itself")
    parser.add_argument("--search", choices=("writer", "input"), default="writer",
                        help="what the retriever searches with: the queries its LM writes, or the question itself")
    parser.add_argument("--tuning", default="{}", help="JSON keyword arguments for FineTune(target='embedder')")
    parser.add_argument("--no-dspy", action="store_true")
    parser.add_argument("--no-tuned", action="store_true", help="skip the rag_tuned arm (FineTune(target='embedder'))")
    parser.add_argument("--dspy-timeout", type=int, default=5400)
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--kb-dir", default=None, help="keep (and reuse) the knowledge base here, not in a temp dir")
    parser.add_argument("--resume", action="store_true", help="keep the arms --out already holds when it was "
                        "measured with the same model, corpus, split and optimizer; run the rest")
    args = parser.parse_args(argv)
    people = profiles(args.profiles, seed=args.seed)
    by_id = {person.id: person for person in people}
    test = questions(people, args.test, seed=args.seed + 1)
    train = questions(people, args.train, seed=args.seed + 2, skip={q.gold_id for q in test})
    replayed = json.loads(Path(args.queries).read_text()) if args.queries else None
    lm = scripted_reader(replayed) if args.scripted else pg.LanguageModel(model=f"local/{MODEL_NAME}", cache=False,
                                                                  max_tokens=96)
    hashed = args.scripted and not args.e5
    embedder = HashEmbeddingModel(dimensions=64) if hashed else pg.EmbeddingModel(EMBEDDER)
    report: dict[str, Any] = {"model": "scripted" if args.scripted else f"local/{MODEL_NAME}",
                              "embedder": "hash-64" if hashed else EMBEDDER, "profiles": args.profiles,
                              "test_items": args.test, "train_items": args.train, "k": args.k,
                              "optimizer": args.optimizer, "search": args.search, "command": " ".join(sys.argv)}
    if args.queries or args.tuning != "{}":
        report.update({"queries": args.queries, "tuning": json.loads(args.tuning)})
    out = Path(args.out)
    kept = resumable(out, report) if args.resume else {}
    report.update(kept)
    if kept:
        print(f"kept from {out} (--resume): " + ", ".join(arm for arm in ARMS if arm in kept), flush=True)

    def save() -> None:
        summarize(report)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1))

    with tempfile.TemporaryDirectory(prefix="pgrag-") as tmp:
        folder = Path(args.kb_dir) if args.kb_dir else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        kb = await build_knowledge_base(folder, people, embedder)
        report["ingest_seconds"] = round(time.perf_counter() - started, 1)
        report["recall_at_k"] = await recall_at_k(kb, test, args.k)
        save()
        built = build_programs(lm, kb, args.k, args.search)
        reward = pg.rewards.RewardFunctionWrapper(fn=answer_reward)
        x_test, y_test = as_data(test, by_id)
        for arm, program, oracle in (("closed_book", built["closed_book"], False), ("oracle", built["oracle"], True),
                                     ("rag_untrained", built["rag"], False)):
            if arm in kept:
                continue
            program.compile(reward=reward)
            x, y = as_data(test, by_id, oracle=oracle) if oracle else (x_test, y_test)
            report[arm] = await score(program, lm, x, y)
            save()
            print(f"{arm:16} {report[arm]['accuracy']:.3f}", flush=True)
        x_train, y_train = as_data(train, by_id)
        # the new arms first (a run cut short keeps them): tuned, DSPy's, then the prompt optimizer alone
        if not args.no_tuned and "rag_tuned" not in kept:
            tuned = build_programs(lm, kb, args.k, args.search)["rag"]
            tuning = pg.optimizers.FineTune(target="embedder", k=args.k, seed=args.seed, **json.loads(args.tuning))
            tuned.compile(reward=reward, optimizer=pg.optimizers.Sequence([tuning, pg.optimizers.get(args.optimizer)]))
            try:
                report["rag_tuned_training"] = await fit_arm(tuned, lm, x_train, y_train)
            except ValueError as error:  # EmbedderTuning found too few positives: say so, go on to DSPy's arms
                report["rag_tuned"] = {"error": str(error)}
                print(f"rag_tuned: {error}", flush=True)
            else:
                report["embedder_tuning"] = tuning.report.get("retriever", {})
                report["recall_tuned"] = await adapter_recall(tuned.get_module("retriever"), test, args.k)
                save()
                report["rag_tuned"] = await score(tuned, lm, x_test, y_test)
                print(f"{'rag_tuned':16} {report['rag_tuned']['accuracy']:.3f}", flush=True)
            save()
        if not args.no_dspy and not args.scripted and "dspy_untrained" not in kept:
            inputs = folder / "dspy_inputs.json"
            await dspy_inputs(inputs, people, test, train, embedder, args.k)
            ours = max([report[key]["lm_calls"] for key in ("rag_training", "rag_tuned_training") if key in report],
                       default=0)
            row = run_dspy(inputs, args, min_calls=ours)
            report["dspy"] = {key: value for key, value in row.items() if key not in ("untrained", "optimized")}
            for arm in ("untrained", "optimized"):
                if arm in row:
                    interval = confidence_interval(row[arm]["hits"])
                    report[f"dspy_{arm}"] = {**row[arm], "interval": [interval.low, interval.high]}
            save()
        if "rag_trained" not in kept:
            rag = built["rag"]
            rag.compile(reward=reward, optimizer=pg.optimizers.get(args.optimizer))
            report["rag_training"] = await fit_arm(rag, lm, x_train, y_train)
            report["rag_trained"] = await score(rag, lm, x_test, y_test)
            save()
            print(f"{'rag_trained':16} {report['rag_trained']['accuracy']:.3f}", flush=True)
        kb.close()
    summarize(report)
    save()
    for name, line in report["paired"].items():
        print(f"{name}: {line}")
    return report


if __name__ == "__main__":
    asyncio.run(main())
