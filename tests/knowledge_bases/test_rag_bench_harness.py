"""bench/rag/run.py's harness on the scripted reader and hash embedder: the arms, the recall, the DSPy inputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from promptgym.testing import HashEmbeddingModel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "rag"))

import run as rag_bench  # noqa: E402
from corpus import correct, profiles, questions  # noqa: E402


def test_the_corpus_has_near_duplicate_names_and_one_answer_per_question() -> None:
    people = profiles(300, seed=0)
    names = {person.name for person in people}
    assert len(names) == 300 and any("." in name for name in names)  # middle initials once plain names run out
    asked = questions(people, 40, seed=1)
    assert len({q.gold_id for q in asked}) == 40
    by_id = {person.id: person for person in people}
    assert all(q.answer in by_id[q.gold_id].text and by_id[q.gold_id].name in q.text for q in asked)
    assert correct("The oboe.", "oboe") and not correct("Tarvelton", "Tarvel") and not correct("", "Tarvel")


async def test_the_arms_score_what_they_should_on_the_scripted_reader(tmp_path: Path) -> None:
    out = tmp_path / "rag.json"
    report = await rag_bench.main(["--scripted", "--profiles", "150", "--test", "16", "--train", "8", "--no-dspy",
                                   "--out", str(out)])
    assert json.loads(out.read_text())["test_items"] == 16
    assert report["closed_book"]["accuracy"] == 0.0 and report["oracle"]["accuracy"] == 1.0
    hybrid = report["recall_at_k"]["hybrid_fts"]["recall"]
    assert 0.0 < report["rag_untrained"]["accuracy"] <= hybrid  # the reader can only answer what was retrieved
    assert report["rag_untrained"]["lm_calls"] == 2 * 16  # the query writer and the answerer, once per item
    assert "rag_untrained vs closed_book" in report["paired"] and report["gap_closed"] is not None
    assert len(report["rag_trained"]["hits"]) == 16
    # the tuned arm: FineTune(target="embedder") then the prompt optimizer; recall tuned and untuned
    assert len(report["rag_tuned"]["hits"]) == 16 and report["embedder_tuning"]["examples"] > 0
    recall = report["recall_tuned"]["hybrid_fts"]
    assert recall["identity"]["recall"] == hybrid  # the identity through the retriever = the knowledge base's own
    if not report["recall_tuned"]["adapter_kept"] and not report["recall_tuned"]["embedder_kept"]:
        assert recall["tuned"]["hits"] == recall["identity"]["hits"]
    assert "rag_tuned vs rag_trained" in report["paired"] and report["gap_closed_tuned"] is not None

    again = await rag_bench.main(["--scripted", "--profiles", "150", "--test", "16", "--train", "8", "--no-dspy",
                                  "--out", str(out), "--resume"])
    assert again["earlier_commands"] == [report["command"]]
    for arm in ("closed_book", "rag_untrained", "rag_tuned", "rag_trained"):
        assert again[arm] == report[arm]  # kept, seconds included: not measured again
    other = await rag_bench.main(["--scripted", "--profiles", "150", "--test", "16", "--train", "6", "--no-dspy",
                                  "--no-tuned", "--out", str(out), "--resume"])
    assert "earlier_commands" not in other and other["train_items"] == 6  # another split: nothing kept


async def test_the_scripted_reader_replays_saved_queries_and_tuning_options_reach_the_tuner(tmp_path: Path) -> None:
    people = profiles(150, seed=0)
    test = questions(people, 16, seed=1)
    train = questions(people, 8, seed=2, skip={q.gold_id for q in test})
    saved = {q.text: ["town"] for q in [*test, *train]}  # a query that names no one: retrieval finds little
    (tmp_path / "queries.json").write_text(json.dumps(saved))
    args = ["--scripted", "--profiles", "150", "--test", "16", "--train", "8", "--no-dspy", "--out",
            str(tmp_path / "rag.json"), "--queries", str(tmp_path / "queries.json")]
    replayed = await rag_bench.main([*args, "--tuning", '{"folds": 3}'])
    plain = await rag_bench.main([*args[:-2]])
    assert replayed["rag_untrained"]["accuracy"] < plain["rag_untrained"]["accuracy"]
    assert replayed["tuning"] == {"folds": 3} and replayed["embedder_tuning"]["folds"] == 3


async def test_dspy_gets_the_same_vectors_for_every_text(tmp_path: Path) -> None:
    people = profiles(20, seed=0)
    test, train = questions(people, 4, seed=1), questions(people, 2, seed=2)
    embedder = HashEmbeddingModel(dimensions=16)
    await rag_bench.dspy_inputs(tmp_path / "inputs.json", people, test, train, embedder, k=3)
    given = json.loads((tmp_path / "inputs.json").read_text())
    assert len(given["corpus"]) == 20 and given["k"] == 3 and len(given["test"]) == 4
    for text in [*given["corpus"], *(q["text"] for q in given["test"] + given["train"])]:
        assert len(given["vectors"][text]) == 16
    expected = np.asarray(await embedder([given["corpus"][0]]))[0]
    assert np.allclose(given["vectors"][given["corpus"][0]], expected, atol=1e-5)
