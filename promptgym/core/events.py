"""Every event the trainer, the optimizers and the run flows emit, each with its payload.

An event is a frozen dataclass. Callbacks receive it in ``on_event``; a run
folder's ``events.jsonl`` holds one JSON line per event,
``{"time": ..., "event": <kind>, **payload}``. An event also reads like the
record it is written as, so code that treats events as dicts keeps working::

    event = CandidateAccepted(candidate=3, parent=1, reason="ahead by 2")
    event.kind                  # 'candidate_accepted'
    event["candidate"], event.get("reason"), event["event"]
    as_record(event)            # {'event': 'candidate_accepted', 'candidate': 3, 'parent': 1, 'reason': 'ahead by 2'}
    from_record({"event": "candidate_accepted", "candidate": 3, "parent": 1, "reason": "ahead by 2"}) == event

docs/events.md lists them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

EVENT_TYPES: dict[str, type["Event"]] = {}
"""Every event class, by its kind."""


@dataclass(frozen=True)
class Event(Mapping[str, Any]):
    """Base class: a ``kind`` and the dataclass fields as payload."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            EVENT_TYPES[cls.kind] = cls

    def payload(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}

    # -- read like a record ---------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        if key == "event":
            return self.kind
        payload = self.payload()
        if key not in payload:
            raise KeyError(key)
        return payload[key]

    def __iter__(self) -> Iterator[str]:
        return iter(["event", *self.payload()])

    def __len__(self) -> int:
        return 1 + len(self.payload())


def as_record(event: Event) -> dict[str, Any]:
    """``{"event": kind, **payload}``: what ``events.jsonl`` stores (without its ``time``)."""
    return {"event": event.kind, **event.payload()}


def from_record(record: Mapping[str, Any]) -> Event | None:
    """The typed event of a stored record (``time`` and unknown keys ignored).

    None for a kind this version does not know, or a record that lacks a field its kind requires
    (an event log is read as it is: written by another version, or cut by a kill).
    """
    cls = EVENT_TYPES.get(str(record.get("event")))
    if cls is None:
        return None
    try:
        if hasattr(cls, "from_payload"):
            return cls.from_payload(record)  # type: ignore[attr-defined]
        names = {item.name for item in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in record.items() if key in names})
    except (KeyError, TypeError):
        return None


# -- the trainer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainBegin(Event):
    kind: ClassVar[str] = "train_begin"
    epochs: int
    steps: int
    train_size: int
    val_size: int


@dataclass(frozen=True)
class StepEnd(Event):
    """A training step (batch) ended; ``reward`` is the running mean over the epoch's training rollouts."""

    kind: ClassVar[str] = "step"
    epoch: int
    step: int
    global_step: int
    reward: float | None = None


@dataclass(frozen=True)
class EpochEnd(Event):
    """An epoch's History row (``logs``); ``intervals``: the 95% interval of each validation score, as a dict."""

    kind: ClassVar[str] = "epoch_end"
    epoch: int
    logs: dict[str, Any]
    best_candidate: int | None = None
    intervals: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainEnd(Event):
    kind: ClassVar[str] = "train_end"
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class SpendCapHit(Event):
    """``max_usd`` stopped the run before a call that would cross it; ``epoch``/``step``: where it resumes."""

    kind: ClassVar[str] = "spend_cap_reached"
    limit_usd: float
    spent_usd: float
    epoch: int
    step: int
    message: str = ""


@dataclass(frozen=True)
class ExampleFailed(Event):
    """A rollout failed (an LM error, an unparseable answer, a bad reward); it scores 0."""

    kind: ClassVar[str] = "example_failed"
    split: str
    index: int
    error: str


@dataclass(frozen=True)
class CheckpointSaved(Event):
    kind: ClassVar[str] = "checkpoint_saved"
    path: str
    epoch: int | None = None
    step: int | None = None
    reason: str | None = None


# -- optimizers: candidates -------------------------------------------------------------------


@dataclass(frozen=True)
class StageStarted(Event):
    """A stage of an ``optimizers.Sequence`` starts from the previous stage's best program."""

    kind: ClassVar[str] = "stage_started"
    stage: str
    index: int
    stages: int
    optimizer: str


@dataclass(frozen=True)
class StageEnded(Event):
    """A stage ended: its validation score (``val``: an interval as a dict, None without validation data)
    and its check against the program it started from (``comparison``, None when it kept that program)."""

    kind: ClassVar[str] = "stage_ended"
    stage: str
    index: int
    val: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    lm_calls: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class CandidateProposed(Event):
    kind: ClassVar[str] = "candidate_proposed"
    candidate: int
    parent: int | None
    origin: str
    component: str | None = None
    params: dict[str, Any] | None = None


@dataclass(frozen=True)
class CandidateScored(Event):
    """A race against the incumbent ended: the candidate's lead in examples, and where it was measured."""

    kind: ClassVar[str] = "candidate_scored"
    candidate: int
    incumbent: int
    lead: float
    examples: int
    where: str


@dataclass(frozen=True)
class CandidateAccepted(Event):
    """A candidate became the incumbent; ``comparison``: its validation check against the start (see
    :mod:`promptgym.optimizers.selection`), when that is what decided."""

    kind: ClassVar[str] = "candidate_accepted"
    candidate: int
    parent: int | None
    reason: str
    comparison: dict[str, Any] | None = None


@dataclass(frozen=True)
class CandidateRejected(Event):
    """A candidate that was scored and lost (GEPA: its minibatch did not beat its parent's; any optimizer's
    best that was not better than the start on validation, with the ``comparison``)."""

    kind: ClassVar[str] = "candidate_rejected"
    candidate: int
    parent: int | None
    reason: str
    comparison: dict[str, Any] | None = None


@dataclass(frozen=True)
class CandidateAdded(Event):
    """A candidate joined the optimizer's pool (GEPA's Pareto pool)."""

    kind: ClassVar[str] = "candidate_added"
    candidate: int
    parent: int | None
    reason: str
    val_reward: float | None = None


@dataclass(frozen=True)
class ProposalFailed(Event):
    """A call of the optimizer's own model failed; the step goes on without that proposal."""

    kind: ClassVar[str] = "proposal_failed"
    optimizer: str
    what: str
    error: str
    operation: str | None = None
    variable: str | None = None
    parent: int | None = None


@dataclass(frozen=True)
class ProposalRejected(Event):
    """A proposed text failed the guard rails (a copy, a label, prose about the fix...) before any rollout."""

    kind: ClassVar[str] = "proposal_rejected"
    optimizer: str
    what: str
    reason: str
    text: str = ""
    operation: str | None = None
    variable: str | None = None
    parent: int | None = None


@dataclass(frozen=True)
class OptimizerError(Event):
    """A part of the optimizer's own work failed and degraded (e.g. OMEGA's distances: GA for that epoch)."""

    kind: ClassVar[str] = "optimizer_error"
    optimizer: str
    stage: str
    error: str


# -- optimizers: search progress --------------------------------------------------------------


@dataclass(frozen=True)
class BudgetPlan(Event):
    """What the optimizer's budget buys, before it starts spending (``unit``: rollouts or lm_calls)."""

    kind: ClassVar[str] = "budget_plan"
    optimizer: str
    unit: str
    limit: int | None
    used: float
    minibatch_size: int | None = None
    validation_size: int | None = None
    num_trials: int | None = None


@dataclass(frozen=True)
class SearchEnd(Event):
    kind: ClassVar[str] = "search_end"
    optimizer: str
    unit: str
    used: float
    limit: int | None
    iterations: int
    candidates: int
    best: int | None
    pool: list[int] | None = None


@dataclass(frozen=True)
class PopulationUpdated(Event):
    kind: ClassVar[str] = "population_updated"
    algorithm: str
    before: list[int]
    population: list[int]
    fitness: dict[int, float]
    competition: dict[int, float]


@dataclass(frozen=True)
class ReflectionSkipped(Event):
    kind: ClassVar[str] = "reflection_skipped"
    candidate: int
    reason: str


@dataclass(frozen=True)
class DemosBootstrapped(Event):
    kind: ClassVar[str] = "demos_bootstrapped"
    optimizer: str
    pool_size: int
    demo_sets: dict[str, int]


@dataclass(frozen=True)
class InstructionProposed(Event):
    kind: ClassVar[str] = "instruction_proposed"
    optimizer: str
    module: str
    tip: str
    text: str


@dataclass(frozen=True)
class TrialEnd(Event):
    kind: ClassVar[str] = "trial_end"
    optimizer: str
    trial: int
    params: dict[str, int]
    value: float
    candidate: int


@dataclass(frozen=True)
class FullEvaluation(Event):
    kind: ClassVar[str] = "full_evaluation"
    optimizer: str
    candidate: int
    score: float


# -- weight training (SFT; RL reuses the checkpoint, export and registry events) ---------------


@dataclass(frozen=True)
class SFTStarted(Event):
    kind: ClassVar[str] = "sft_started"
    base_model: str
    train_rows: int
    validation_rows: int
    epochs: int
    steps: int
    steps_per_epoch: int
    trainable_parameters: int
    skipped_rows: int = 0
    resume_from_step: int | None = None


@dataclass(frozen=True)
class SFTStep(Event):
    """One optimiser step: ``loss`` is the mean per trained token; ``epoch`` counts fractions of epochs."""

    kind: ClassVar[str] = "sft_step"
    step: int
    total_steps: int
    epoch: float
    loss: float | None
    lr: float
    tokens_per_s: float | None = None
    grad_norm: float | None = None
    seconds: float | None = None
    elapsed_s: float = 0.0
    eval_loss: float | None = None


@dataclass(frozen=True)
class SFTEval(Event):
    """Mean loss per trained token on the validation rows (``label``: before, step or final)."""

    kind: ClassVar[str] = "sft_eval"
    step: int
    eval_loss: float
    label: str


@dataclass(frozen=True)
class SFTPlanned(Event):
    """``n_epochs="auto"``: the steps and evaluations planned to fill ``budget_s``, from the first steps' times."""

    kind: ClassVar[str] = "sft_planned"
    steps: int
    epochs: float
    steps_per_epoch: int
    eval_steps: int
    patience: int
    step_s: float
    eval_s: float
    budget_s: float
    capped: str = ""


@dataclass(frozen=True)
class ModelExported(Event):
    """A GGUF file written (``part``: merged or adapter)."""

    kind: ClassVar[str] = "model_exported"
    part: str
    format: str
    path: str
    size: str


@dataclass(frozen=True)
class ModelRegistered(Event):
    """A fine-tuned model usable as ``model_id`` (``LanguageModel(model=...)``, ``[model] name``)."""

    kind: ClassVar[str] = "model_registered"
    model_id: str
    files: dict[str, str] = field(default_factory=dict)


# -- reinforcement learning (GRPO against a task app) -----------------------------------------


@dataclass(frozen=True)
class RLStarted(Event):
    """An RL run began (or resumed after ``resume_from_iteration``); ``policy_url`` is the policy server."""

    kind: ClassVar[str] = "rl_started"
    base_model: str
    environment: str
    iterations: int
    group_size: int
    batch_size: int
    train_seeds: int
    validation_seeds: int
    test_seeds: int
    trainable_parameters: int
    policy_url: str = ""
    resume_from_iteration: int | None = None


@dataclass(frozen=True)
class RLIteration(Event):
    """One iteration: rollouts of ``batch_size`` seeds x ``group_size``, then the update (when any group had signal).

    ``mean_reward`` over the rollouts that finished; ``reward_spread`` is the mean of the groups' standard
    deviations; ``zero_signal_groups`` of ``groups`` had all-equal rewards and were left out; ``tokens_per_s``
    counts sampled tokens over the rollout phase's wall time.
    """

    kind: ClassVar[str] = "rl_iteration"
    iteration: int
    iterations: int
    mean_reward: float | None
    reward_spread: float
    groups: int
    zero_signal_groups: int
    failed_rollouts: int
    completion_tokens: int
    tokens_per_s: float | None
    rollout_s: float
    update_s: float
    seconds: float
    updated: bool
    loss: float | None = None
    kl: float | None = None
    clip_fraction: float | None = None
    lr: float | None = None
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class RLEvaluation(Event):
    """Greedy rollouts of a split's seeds, one each (``label``: before, during or after training); a failed
    rollout scores 0 here."""

    kind: ClassVar[str] = "rl_evaluation"
    iteration: int
    label: str
    split: str
    size: int
    reward: float | None
    failures: int = 0


@dataclass(frozen=True)
class RolloutFailedEvent(Event):
    """A rollout that failed after its retries (task app error, timeout, bad answer); it is left out."""

    kind: ClassVar[str] = "rollout_failed"
    iteration: int
    seed: int
    split: str
    error: str


# -- a run (the CLI's flows) ------------------------------------------------------------------


@dataclass(frozen=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    run_id: str
    resume: bool = False


@dataclass(frozen=True)
class Resumed(Event):
    kind: ClassVar[str] = "resumed"
    from_epoch: int
    checkpoint: str
    from_step: int = 0


@dataclass(frozen=True)
class Evaluated(Event):
    """A scored pass over a held-out split (``label``: baseline or best); ``logs`` are its scores."""

    kind: ClassVar[str] = "evaluated"
    label: str
    split: str
    size: int
    logs: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        # The scores sit beside the other keys in the record, as `evaluate()` returns them.
        return {"label": self.label, "split": self.split, "size": self.size, **self.logs}

    @classmethod
    def from_payload(cls, record: Mapping[str, Any]) -> "Evaluated":
        fixed = ("event", "time", "session_lm_calls", "label", "split", "size")
        return cls(label=record["label"], split=record["split"], size=record["size"],
                   logs={key: value for key, value in record.items() if key not in fixed})


@dataclass(frozen=True)
class ArtifactsWritten(Event):
    kind: ClassVar[str] = "artifacts_written"
    files: list[str]


@dataclass(frozen=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    status: str
    elapsed_s: float
    lm_calls: int = 0
    error: str | None = None
