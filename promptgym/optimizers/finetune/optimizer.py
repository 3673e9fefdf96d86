"""``FineTune``: weights as one more lever of ``fit()``: SFT rows from the program, LoRA, the tuned model as a candidate.

In ``fit()``, for every trainable Generator, FineTune builds SFT rows in the
program's own message format, from

- ``source="labels"``: the labelled training examples (the messages the
  Generator sends for the example's input, the label's fields as its answer;
  only Generators that read the program's input and write its output have labels);
- ``source="traces"``: the program's own training runs that earn
  ``min_reward`` (each Generator step of such a run: what it sent, what it answered);
- ``source="both"``: the two together, each conversation once (a run that
  answered exactly the label gives the row its label gives: counting it twice
  would weight what the model already knows);
- ``source="feedback"``: what people said about the served program (``traces=``,
  the folder of ``serve --record``): each corrected output is a label, and with
  ``traces_min_rating`` each output rated at least that is one too;

trains LoRA on the Generator's model with the SFT job (:mod:`promptgym.finetune.sft_run`, through :mod:`promptgym.optimizers.finetune.sft`:
same settings, run folder, checkpoints, resume, events), registers the tuned
model, and proposes the program with each Generator on it. Like any
candidate it replaces the start only when it is ahead on validation
(:mod:`promptgym.optimizers.selection`); the program then runs on (and
``save()`` stores) the tuned model string::

    program.compile(reward="exactmatch", optimizer=FineTune(source="labels", n_epochs=1))
    await program.fit(x_train, y_train, validation_split=0.2)
    program.modules[-1].language_model.model       # 'local/ft-finetune-sentiment-1a2b3c' when it won

``Sequence([KNNFewShot(), FineTune(), KNNFewShot()])`` chains prompts and weights (docs/optimizers/finetune.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import math
import random
import shutil
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from promptgym.core.atomic import atomic_write_text
from promptgym.core.serialization import register_builtin
from promptgym.datasets.loaders import DatasetError
from promptgym.datasets.traces import labelled_traces, open_trace_store
from promptgym.modules.generator import as_json
from promptgym.modules.model_choice import MODELS_KEY, current_models, forget_model
from promptgym.optimizers.base import Candidate, FitSizes, Optimizer, StageEstimate
from promptgym.optimizers.embedder_tuning import EmbedderTuning
from promptgym.optimizers.finetune.errors import FineTuneError
from promptgym.optimizers.finetune.report import training_entry, with_training
from promptgym.optimizers.kit import Budget, OptimizerContext, TrainablePrompt, trainable_prompts
from promptgym.optimizers.selection import race_on_validation
from promptgym.rewards.base import to_json
from promptgym.rollouts import ExampleResult

if TYPE_CHECKING:
    from promptgym.finetune.settings import LoraSettings, SFTSettings

logger = logging.getLogger("promptgym")

SOURCES = ("labels", "traces", "both", "feedback")
Conversation = list[dict[str, str]]


OWN_ARGUMENTS = ("n_epochs", "batch_size", "learning_rate", "lora", "max_length", "base_model")
"""SFT settings FineTune takes as its own arguments: in ``sft=`` they would be given twice."""
SET_BY_FINETUNE = {"train_file": "FineTune writes the training file itself, from the program's labels or runs"}


def check_sft_settings(sft: Any) -> dict[str, Any]:
    """``sft`` as a dict, or a FineTuneError naming the key that belongs elsewhere and where it goes.

    >>> check_sft_settings({"save_steps": 5})
    {'save_steps': 5}
    """
    if sft is None:
        return {}
    if not isinstance(sft, dict):
        raise FineTuneError(f"FineTune: sft must be a dict of SFT settings (e.g. {{'save_steps': 5}}), "
                            f"got {type(sft).__name__}")
    for key, value in sft.items():
        if key in OWN_ARGUMENTS:
            raise FineTuneError(f"FineTune: sft={{{key!r}: ...}} is one of FineTune's own arguments; "
                                f"pass FineTune({key}={value!r}) instead and leave it out of sft")
        if key in SET_BY_FINETUNE:
            raise FineTuneError(f"FineTune: sft={{{key!r}: ...}}: {SET_BY_FINETUNE[key]}; leave it out of sft")
    return dict(sft)


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text.lower()).strip("-.")[:40] or "program"


@register_builtin
class FineTune(Optimizer):
    """Fine-tune each trainable Generator's model (LoRA SFT) on rows built from the program; keep it if it wins.

    Args:
        source: ``"labels"``, ``"traces"``, ``"both"`` or ``"feedback"`` (see the module doc).
        traces, traces_program, traces_version, traces_min_rating: for ``source="feedback"``: the trace store
            (``serve --record`` folder or its ``traces.db``), whose program (default: this program's name) and
            version (default: all), and the rating from which an uncorrected output counts as a label.
        min_reward: a training run must earn at least this for its steps to become rows (traces).
        with_demonstrations: rows show the Generator's demonstrations as it sends them (default: without,
            so the tuned model answers without them; the tuned program is then raced with and without them).
        n_epochs: passes over the rows, or ``"auto"``: fill ``max_train_seconds`` (which it needs): hold out
            validation rows, time the first steps, plan the steps, stop early when the validation loss stops
            falling, and export the best checkpoint (docs/optimizers/finetune.md, "Training that fills its budget").
        batch_size, learning_rate, lora, max_length: the SFT settings (``lora``: a
            ``LoraSettings`` or a dict such as ``{"r": 8}``).
        max_train_seconds: stop SFT at this budget and keep the last checkpoint (the tuned model is what
            was trained by then); it must leave room for one step. With ``n_epochs="auto"``, the budget to fill.
        base_model: the weights to train (default: each Generator's own ``local/...`` model); a
            Hugging Face folder or a ``local/...`` name.
        output_dir: where the SFT runs go (default ``runs/finetune-<program>``; the CLI uses the run folder).
        sft: any other ``SFTSettings`` field (``save_steps``, ``export``, ``gradient_accumulation_steps``, ...).
        seed: the SFT seed (default: drawn from the trainer's).
        target: ``"lm"`` (this class) or ``"embedder"``: ``FineTune(target="embedder", ...)`` builds an
            :class:`~promptgym.optimizers.embedder_tuning.EmbedderTuning` from the other arguments instead.
    """

    def __new__(cls, *args: Any, target: Literal["lm", "embedder"] = "lm", **kwargs: Any) -> Any:
        """``FineTune(target="embedder")`` is :class:`EmbedderTuning` (the retriever's query embedder: e5 BitFit or a linear map), issue 39."""
        if target == "embedder":
            unknown = sorted(set(kwargs) - set(inspect.signature(EmbedderTuning).parameters))
            if args or unknown:
                raise FineTuneError(f"FineTune(target='embedder') takes EmbedderTuning's keyword arguments "
                                    f"({', '.join(inspect.signature(EmbedderTuning).parameters)}), got "
                                    f"{', '.join(unknown) or 'positional arguments'}")
            return EmbedderTuning(**kwargs)
        if target != "lm":
            raise FineTuneError(f"FineTune: target must be 'lm' or 'embedder', got {target!r}")
        return super().__new__(cls)

    def __init__(self, source: Literal["labels", "traces", "both", "feedback"] = "labels", min_reward: float = 1.0,
                 with_demonstrations: bool = False, n_epochs: int | Literal["auto"] = 1, batch_size: int = 4,
                 learning_rate: float = 2e-4, lora: LoraSettings | dict[str, Any] | None = None,
                 max_length: int = 1024, max_train_seconds: float | None = None, base_model: str | None = None,
                 output_dir: str | None = None, sft: dict[str, Any] | None = None, seed: int | None = None,
                 traces: str | None = None, traces_program: str | None = None, traces_version: str | None = None,
                 traces_min_rating: float | None = None, name: str | None = None,
                 description: str | None = None, target: Literal["lm", "embedder"] = "lm") -> None:
        if source not in SOURCES:
            raise FineTuneError(f"FineTune: source must be one of {', '.join(SOURCES)}, got {source!r}")
        if (source == "feedback") != (traces is not None):
            raise FineTuneError("FineTune: source='feedback' learns from a trace store: give traces='DIR' (the "
                                "folder of serve --record)" if traces is None else
                                f"FineTune: traces= is read only with source='feedback', got source={source!r}")
        if max_train_seconds is not None and max_train_seconds <= 0:
            raise FineTuneError(f"FineTune: max_train_seconds must be > 0 or None, got {max_train_seconds!r}")
        check_epochs(n_epochs, max_train_seconds)
        super().__init__(seed=seed, budget=Budget(None), name=name, description=description)
        self.source = source
        self.min_reward = float(min_reward)
        self.with_demonstrations = bool(with_demonstrations)
        self.lora = sft_engine().lora_settings(lora)
        self.max_train_seconds = max_train_seconds
        self.base_model = base_model
        self.output_dir = output_dir
        self.sft = check_sft_settings(sft)
        self.n_epochs, self.batch_size, self.learning_rate, self.max_length = n_epochs, batch_size, learning_rate, max_length
        self.traces, self.traces_program, self.traces_version = traces, traces_program, traces_version
        self.traces_min_rating = traces_min_rating
        self.settings_for("check", "check", "check")  # a bad SFT setting fails here, not after the runs
        self.tuned: dict[str, str] = {}
        """Model id per SFT job (by base model), saved with the state: a resumed fit does not train again."""
        self.rows: dict[str, int] = {}
        """Rows per Generator, of the last training."""
        self.sft_steps = 0
        self.sft_seconds = 0.0
        self.training: dict[str, dict[str, Any]] = {}
        """What each SFT job (by base model) trained: rows, epochs, steps, seconds, validation losses, why it
        stopped (:func:`promptgym.optimizers.finetune.report.training_entry`); the comparison carries it."""

    # -- settings -------------------------------------------------------------------------

    def settings_for(self, base_model: str, train_file: str, validation_file: str | None = None) -> SFTSettings:
        # the merged GGUF is what the Generator runs: the adapter's own export would only cost time
        settings = {"summary_samples": 0, "validation_split": 0.0, "save_steps": 10,
                    "export": {"merged": "q8_0", "adapter": False}, **self.sft,
                    **({"validation_file": validation_file} if validation_file else {})}
        # "auto" goes through as the CLI's SFT gives it: the run plans its steps from the settings' own budget
        epochs = {"n_epochs": "auto", "max_train_seconds": self.max_train_seconds} if self.n_epochs == "auto" \
            else {"n_epochs": self.n_epochs}
        return sft_engine().sft_settings(base_model=base_model, train_file=train_file, **epochs,
                                         batch_size=self.batch_size, learning_rate=self.learning_rate,
                                         lora=self.lora, max_length=self.max_length, **settings)

    # -- lifecycle ------------------------------------------------------------------------

    def build(self, program: Any) -> None:
        super().build(program)
        start = self.start
        if MODELS_KEY not in start.variables:  # so that falling back to the start also restores its models
            models = current_models(program)
            start.variables[MODELS_KEY] = {state.module_name: models[state.module_name] for state in self.prompts
                                           if state.module_name in models}

    async def on_train_begin(self, ctx: OptimizerContext) -> None:
        """Check, before any call, that every Generator can be trained and that the source has rows to give."""
        self.base_models(ctx.rollouts.program)
        if self.source in ("labels", "feedback") and not any(state.answer_fields for state in self.prompts):
            names = ", ".join(state.module_name for state in self.prompts) or "none"
            raise FineTuneError(f"FineTune(source='labels'): no Generator reads the program's input and writes its "
                                f"output (trainable Generators: {names}), so the labels are no Generator's answer; "
                                "use source='traces' (the program's own runs that earn min_reward)")

    def base_models(self, program: Any) -> dict[str, str]:
        """The weights each trainable Generator's SFT starts from; a clear error for a model it cannot train."""
        chosen: dict[str, str] = {}
        for state in self.prompts:
            module = state.module
            model = self.base_model or getattr(getattr(module, "language_model", None), "model", None)
            if not model:
                raise FineTuneError(f"FineTune: Generator {state.module_name!r} has no language model to train")
            engine = sft_engine()
            try:
                engine.check_base_model(model, given=bool(self.base_model))
            except engine.BaseModelError as error:
                where = "base_model" if self.base_model else f"Generator {state.module_name!r} runs on {model!r}"
                raise FineTuneError(
                    f"FineTune: {where}: cannot be trained here ({error}). A remote model's weights are not on "
                    "this machine: run the Generator on a local/... model, or pass base_model= (a local/... model "
                    "or a Hugging Face folder); the Generator then runs on the tuned copy") from None
            chosen[state.module_name] = model
        return chosen

    async def train_step(self, ctx: OptimizerContext, batch: list[int]) -> dict[str, float]:
        """With traces, run the start on the batch (the runs the rows come from); SFT runs at the epoch's end."""
        if self.source in ("traces", "both") and not self.tuned:
            await self.score(ctx, self.start, "train", batch)
        return {"sft_steps": float(self.sft_steps)}

    async def on_epoch_end(self, ctx: OptimizerContext, epoch: int) -> None:
        if not isinstance(ctx, OptimizerContext):  # synalinks' variable form (optimizers.variable_population)
            return await super().on_epoch_end(ctx, epoch)
        if self.epochs_done == 0:
            contenders = await self.tune(ctx)
            if ctx.rollouts.size("val") == 0:
                await self.accept(ctx, contenders[0], reason="tuned model; unchecked: no validation data")
            else:
                trained = [self.training[key] for key in sorted(self.training)]
                await race_on_validation(self, ctx, contenders,
                                         describe=lambda c: f"{c.origin} candidate {c.id} ({models_of(c)}): ",
                                         annotate=lambda comparison: with_training(comparison, trained))
        await super().on_epoch_end(ctx, epoch)

    # -- the work -------------------------------------------------------------------------

    async def tune(self, ctx: OptimizerContext) -> list[Candidate]:
        """Build the rows, train one model per base model, and return the tuned candidates."""
        program = ctx.rollouts.program
        bases = self.base_models(program)
        rows = await self.build_rows(ctx)
        folder = Path(self.output_dir or f"runs/finetune-{slug(program.name)}")
        jobs: dict[str, list[Conversation]] = {}
        for module_name, conversations in rows.items():
            jobs.setdefault(bases[module_name], []).extend(conversations)
        tuned_models: dict[str, str] = {}
        for base, conversations in jobs.items():
            key = hashlib.sha256(base.encode()).hexdigest()[:8]
            if key not in self.tuned:
                self.tuned[key] = await self.train(ctx, base, conversations, folder / f"sft-{slug(Path(base).name)}-{key}")
            for module_name in rows:
                if bases[module_name] == base:
                    tuned_models[module_name] = self.tuned[key]
        start = self.start
        variables = {**start.variables, MODELS_KEY: {**start.variables.get(MODELS_KEY, {}), **tuned_models}}
        contenders = [self.find(variables) or self.add_candidate(variables, parent=start.id, origin="finetune")]
        if not self.with_demonstrations:  # the rows showed no demonstrations: also try the tuned model without them
            bare = {name: ({**value, "examples": []} if name in self.trained_variables(rows) else value)
                    for name, value in variables.items()}
            for name in self.trained_variables(rows):
                bare[name].pop("retrieval", None)
            if bare != variables:
                contenders.append(self.find(bare) or self.add_candidate(bare, parent=start.id,
                                                                        origin="finetune_without_demonstrations"))
        return contenders

    def trained_variables(self, rows: dict[str, list[Conversation]]) -> list[str]:
        return [state.variable for state in self.prompts if state.module_name in rows]

    async def build_rows(self, ctx: OptimizerContext) -> dict[str, list[Conversation]]:
        """SFT conversations per Generator name, from the labels and/or the runs that earn ``min_reward``."""
        rows: dict[str, list[Conversation]] = {}
        if self.source in ("labels", "both"):
            for state in self.prompts:
                if state.answer_fields:
                    rollouts = ctx.rollouts
                    targets = [rollouts.target_json("train", i) for i in range(rollouts.size("train"))]
                    rows.setdefault(state.module_name, []).extend(
                        await self.label_rows(rollouts.program, state, rollouts.inputs("train"), targets))
            if self.source == "labels" and not any(rows.values()):
                fields = {state.module_name: sorted(state.answer_fields or ()) for state in self.prompts}
                raise FineTuneError(f"FineTune(source='labels'): no training label holds every field a Generator "
                                    f"answers ({fields}); give complete labels, or use source='traces'")
        if self.source in ("traces", "both"):
            results = await self.score(ctx, self.start, "train", list(range(ctx.rollouts.size("train"))))
            kept = [r for r in results if not r.error and r.reward >= self.min_reward]
            if not kept and self.source == "traces":
                best = max((r.reward for r in results), default=0.0)
                raise FineTuneError(f"FineTune(source='traces'): none of the {len(results)} training runs earned "
                                    f"min_reward={self.min_reward:g} (the best earned {best:g}), so there is no row "
                                    "to train on; lower min_reward, or use source='labels' or 'both'")
            for module_name, conversation in await self.trace_rows(ctx, kept):
                rows.setdefault(module_name, []).append(conversation)
        if self.source == "feedback":
            for module_name, conversations in (await self.feedback_rows(ctx.rollouts.program)).items():
                rows.setdefault(module_name, []).extend(conversations)
        rows = {name: distinct(conversations) for name, conversations in rows.items() if conversations}
        self.rows = {name: len(conversations) for name, conversations in rows.items()}
        return rows

    async def feedback_rows(self, program: Any) -> dict[str, list[Conversation]]:
        """Rows from the trace store's corrections (and well-rated outputs), for the Generators that write the output."""
        wanted = self.traces_program or program.name
        try:
            store = open_trace_store(self.traces)
        except DatasetError as error:
            raise FineTuneError(f"FineTune(source='feedback'): {error}") from None
        pairs = labelled_traces(store, program=wanted, version=self.traces_version, min_rating=self.traces_min_rating)
        xs, targets, unfit = [], [], 0
        for trace, label in pairs:
            try:
                xs.append(program.input_data_model(**trace.inputs))
            except Exception:  # noqa: BLE001 - an input of an older program version: skipped and counted
                unfit += 1
                continue
            targets.append(label)
        if unfit:
            logger.warning("FineTune(source='feedback'): %d of %d labelled traces of %r no longer fit the input "
                           "DataModel and were left out", unfit, len(pairs), wanted)
        rows: dict[str, list[Conversation]] = {}
        for state in self.prompts:
            if state.answer_fields:
                rows[state.module_name] = await self.label_rows(program, state, xs, targets)
        if not any(rows.values()):
            rating = "" if self.traces_min_rating is None else f" or rated at least {self.traces_min_rating:g}"
            raise FineTuneError(f"FineTune(source='feedback'): no trace of program {wanted!r} in {self.traces} has a "
                                f"correction{rating} that a Generator answers, so there is no row to train on; "
                                "correct some answers (POST /v1/feedback), or set traces_min_rating")
        return rows

    async def label_rows(self, program: Any, state: TrainablePrompt, xs: list[Any], targets: list[dict[str, Any]]
                         ) -> list[Conversation]:
        """The messages ``state``'s Generator sends for each input, each label's fields as its answer."""
        module, fields = state.module, state.answer_fields or frozenset()
        order = list(module.output_data_model(program.input_data_model).model_fields)
        conversations = []
        for x, target in zip(xs, targets):
            if not fields <= set(target):
                continue
            inputs = as_json(x)
            schema = x.get_schema() if callable(getattr(x, "get_schema", None)) else None
            examples = await module.demonstrations(inputs) if self.with_demonstrations else []
            answer = {name: target[name] for name in order if name in fields}
            conversations.append([*module.messages(inputs, examples, input_schema=schema),
                                  {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)}])
        return conversations

    async def trace_rows(self, ctx: OptimizerContext, results: list[ExampleResult]) -> list[tuple[str, Conversation]]:
        program, trainable = ctx.rollouts.program, {state.module_name for state in self.prompts}
        rows = []
        for result in results:
            for step in result.trace.steps if result.trace else []:
                if step.module in trainable:
                    conversation = await step_conversation(program, step, self.with_demonstrations)
                    if conversation is not None:
                        rows.append((step.module, conversation))
        return rows

    async def train(self, ctx: OptimizerContext, base: str, conversations: list[Conversation], folder: Path) -> str:
        """One SFT job (in a worker thread, its events forwarded to the trainer's stream); returns the model id.

        With ``n_epochs="auto"`` some rows are held out (:func:`held_out`): the run's validation loss, for
        its early stop and its best checkpoint.
        """
        folder.mkdir(parents=True, exist_ok=True)
        seed = self.seed if self.seed is not None else int(self.start_rng(ctx).integers(2**31))
        auto = self.n_epochs == "auto"
        validation: list[Conversation] = []
        if auto:  # FineTune's own seed, not the drawn one: a resumed fit holds out the same rows, so it resumes
            conversations, validation = held_out(conversations, self.seed if self.seed is not None else 0)
        files = {"train.jsonl": conversations, **({"validation.jsonl": validation} if auto else {})}
        texts = {name: "".join(json.dumps({"messages": c}, ensure_ascii=False) + "\n" for c in rows)
                 for name, rows in files.items()}
        if any(not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text
               for name, text in texts.items()):
            # other rows than the run in this folder trained on: its checkpoints are not this run's to resume
            shutil.rmtree(folder / "checkpoints", ignore_errors=True)
            for name, text in texts.items():
                atomic_write_text(folder / name, text)
        settings = self.settings_for(base, str(folder / "train.jsonl"),
                                     str(folder / "validation.jsonl") if auto else None)
        loop = asyncio.get_running_loop()

        def forward(event: Any) -> None:
            asyncio.run_coroutine_threadsafe(ctx.emit(event), loop).result()

        name = f"finetune-{slug(Path(base).name)}"
        engine = sft_engine()
        # with "auto" max_train_seconds is the budget the settings carry, not a cap on a fixed run
        result = await asyncio.to_thread(engine.run_sft_job, settings, folder, seed, name,
                                         None if auto else self.max_train_seconds, forward)
        self.training[hashlib.sha256(base.encode()).hexdigest()[:8]] = training_entry(
            base, result, rows=len(conversations), validation_rows=len(validation), n_epochs=self.n_epochs)
        self.sft_steps += result.steps
        self.sft_seconds += result.elapsed_s
        if not result.model_id:
            raise FineTuneError(f"FineTune: the SFT run in {folder} ended without a model ({result.status})")
        forget_model(result.model_id)  # a model retrained under the same name loads its new weights
        return result.model_id

    # -- estimates, state, config -----------------------------------------------------------

    # -- the protocol's preview hooks (optimizers.base) -------------------------------------

    def estimate(self, program: Any, sizes: FitSizes) -> list[StageEstimate]:
        """Program runs: the start on every training example (traces), the tuned program(s) and the start on
        every validation example; and the SFT steps per base model."""
        rows = sizes.train * sizes.calls_per_run
        if self.n_epochs == "auto":
            note = (f"SFT with n_epochs='auto': steps planned after the first ones to fill max_train_seconds="
                    f"{self.max_train_seconds:g} (<= {self.estimate_sft_steps(rows)} steps per base model, "
                    f"{sizes.train} rows less the held-out ones, batch {self.batch_size}), early stop on the "
                    "held-out rows' loss")
        else:
            note = (f"SFT <= {self.estimate_sft_steps(rows)} steps per base model ({sizes.train} rows, batch "
                    f"{self.batch_size}, {self.n_epochs} epoch(s)); the step time is measured when training starts"
                    + (f", stopped at max_train_seconds={self.max_train_seconds:g}" if self.max_train_seconds else ""))
        return [StageEstimate(type(self).__name__, lm_calls=(2 if self.with_demonstrations else 3) * sizes.val,
                              training_runs=sizes.train if self.source in ("traces", "both") else 0, note=note)]

    def check_before_run(self, program: Any, x: Any, y: Any) -> list[str]:
        """Time one SFT step of each base model (it loads the model): what training will take, before it starts."""
        with tempfile.TemporaryDirectory(prefix="promptgym-step-") as folder:
            seconds = self.measure_step_seconds(program, x, y, folder)
        steps = self.estimate_sft_steps(len(x) * max(1, len(trainable_prompts(program))))
        if self.n_epochs == "auto":
            budget = float(self.max_train_seconds or 0)
            return [f"FineTune: one SFT step of {base} takes {step_s:.3g} s here: n_epochs='auto' fills "
                    f"max_train_seconds={budget:g} with about {min(steps, int(budget / step_s))} steps "
                    f"(<= {steps}), planned again from the run's own first steps" for base, step_s in seconds.items()]
        budget_note = f", stopped at max_train_seconds={self.max_train_seconds:g}" if self.max_train_seconds else ""
        return [f"FineTune: one SFT step of {base} takes {step_s:.3g} s here: about {steps * step_s / 60:.0f} min "
                f"for <= {steps} steps{budget_note}" for base, step_s in seconds.items()]

    def place_outputs(self, folder: Path) -> None:
        """The SFT runs go under ``folder`` unless ``output_dir`` was given."""
        if self.output_dir is None:
            self.output_dir = str(folder)

    def measure_step_seconds(self, program: Any, xs: Any, ys: Any, folder: str | Path) -> dict[str, float]:
        """Seconds of one SFT step per base model, on the first ``batch_size`` labelled rows (loads each model).

        Generators without labels (traces only) are not timed.
        """
        states = [state for state in trainable_prompts(program) if state.answer_fields]
        self.prompts = trainable_prompts(program)
        bases = self.base_models(program)
        targets = [to_json(y) or {} for y in ys[:self.batch_size]]
        timed: dict[str, float] = {}
        for state in states:
            base = bases[state.module_name]
            if base in timed:
                continue
            rows = asyncio.run(self.label_rows(program, state, list(xs[:self.batch_size]), targets))
            if not rows:
                continue
            path = Path(folder) / f"step-time-{slug(Path(base).name)}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, "".join(json.dumps({"messages": r}, ensure_ascii=False) + "\n" for r in rows))
            timed[base] = sft_engine().measure_sft_step(self.settings_for(base, str(path)))
        return timed

    def estimate_sft_steps(self, rows: int) -> int:
        """Optimiser steps of an SFT on ``rows`` rows (per base model; with ``n_epochs="auto"``, the most a plan takes)."""
        accumulation = int(self.sft.get("gradient_accumulation_steps", 1))
        epochs = sft_engine().MAX_EPOCHS if self.n_epochs == "auto" else self.n_epochs
        return math.ceil(math.ceil(rows / self.batch_size) / accumulation) * epochs

    # -- state, config ----------------------------------------------------------------------

    def get_extra_state(self) -> dict[str, Any]:
        return {"tuned": dict(self.tuned), "rows": dict(self.rows), "sft_steps": self.sft_steps,
                "sft_seconds": self.sft_seconds, "training": dict(self.training)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.tuned = dict(state.get("tuned") or {})
        self.rows = dict(state.get("rows") or {})
        self.sft_steps = int(state.get("sft_steps", 0))
        self.sft_seconds = float(state.get("sft_seconds", 0.0))
        self.training = dict(state.get("training") or {})

    def get_config(self) -> dict[str, Any]:
        return {"source": self.source, "min_reward": self.min_reward, "with_demonstrations": self.with_demonstrations,
                "n_epochs": self.n_epochs, "batch_size": self.batch_size, "learning_rate": self.learning_rate,
                "lora": self.lora.model_dump(), "max_length": self.max_length,
                "max_train_seconds": self.max_train_seconds, "base_model": self.base_model,
                "output_dir": self.output_dir, "sft": dict(self.sft), "seed": self.seed, "traces": self.traces,
                "traces_program": self.traces_program, "traces_version": self.traces_version,
                "traces_min_rating": self.traces_min_rating, **self.naming_config()}


def check_epochs(n_epochs: Any, max_train_seconds: float | None) -> None:
    """``n_epochs`` is a whole number, or ``"auto"`` with the budget it fills; else a FineTuneError naming both.

    >>> check_epochs("auto", None)
    Traceback (most recent call last):
    ...
    promptgym.optimizers.finetune.errors.FineTuneError: FineTune: n_epochs='auto' plans the epochs that fill max_train_seconds, but max_train_seconds is not set: give both (e.g. FineTune(n_epochs='auto', max_train_seconds=1200)), or a number of epochs
    """
    if n_epochs == "auto":
        if max_train_seconds is None:
            raise FineTuneError("FineTune: n_epochs='auto' plans the epochs that fill max_train_seconds, but "
                                "max_train_seconds is not set: give both (e.g. FineTune(n_epochs='auto', "
                                "max_train_seconds=1200)), or a number of epochs")
    elif isinstance(n_epochs, str) or isinstance(n_epochs, bool):
        raise FineTuneError(f"FineTune: n_epochs must be a whole number >= 1 or 'auto', got {n_epochs!r}")


VALIDATION_FRACTION = 0.1
VALIDATION_MAX = 64
"""``n_epochs="auto"`` holds out a tenth of the rows, at most 64 (docs/optimizers/finetune.md says why)."""


def held_out(conversations: list[Conversation], seed: int) -> tuple[list[Conversation], list[Conversation]]:
    """``(training rows, validation rows)``: a seeded draw of a tenth of the rows (at least 1, at most 64)
    is held out, the rest keep their order.

    >>> rows = [[{"role": "user", "content": str(i)}] for i in range(30)]
    >>> train, validation = held_out(rows, seed=0)
    >>> len(train), len(validation)
    (27, 3)
    """
    if len(conversations) < 2:
        raise FineTuneError(f"FineTune(n_epochs='auto'): {len(conversations)} row(s) to train on, and the early stop "
                            "needs at least one more to hold out for its validation loss; give more training "
                            "examples, or a number of epochs")
    count = min(VALIDATION_MAX, max(1, round(len(conversations) * VALIDATION_FRACTION)))
    chosen = set(random.Random(seed).sample(range(len(conversations)), count))
    return ([c for i, c in enumerate(conversations) if i not in chosen],
            [c for i, c in enumerate(conversations) if i in chosen])


def distinct(conversations: list[Conversation]) -> list[Conversation]:
    """``conversations`` in order, each once.

    >>> row = [{"role": "user", "content": "2+2"}, {"role": "assistant", "content": "4"}]
    >>> len(distinct([row, list(row)]))
    1
    """
    seen: set[str] = set()
    kept = []
    for conversation in conversations:
        key = json.dumps(conversation, sort_keys=True, ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            kept.append(conversation)
    return kept


def models_of(candidate: Candidate) -> str:
    return ", ".join(f"{name} on {model}" for name, model in (candidate.variables.get(MODELS_KEY) or {}).items())


def sft_engine() -> ModuleType:
    """The SFT bridge (:mod:`promptgym.optimizers.finetune.sft`), imported on first use."""
    # deferred: it loads promptgym.finetune's SFT engine, which a program that never fine-tunes does not need
    from promptgym.optimizers.finetune import sft

    return sft


async def step_conversation(program: Any, step: Any, with_demonstrations: bool) -> list[dict[str, str]] | None:
    """The messages a Generator step sent plus its answer; None for a module that builds no chat prompt."""
    module = program.get_module(step.module)
    if not callable(getattr(module, "messages", None)):
        return None
    examples = await module.demonstrations(step.inputs) if with_demonstrations else []
    messages = module.messages(step.inputs, examples, input_schema=step.schema)
    return [*messages, {"role": "assistant", "content": json.dumps(step.outputs, ensure_ascii=False)}]
