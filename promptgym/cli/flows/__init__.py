"""The job types ``promptgym train`` knows: one :class:`Flow` per type, and the one table keyed by type.

    flow = flow_for(config.job.type)       # the PromptFlow, SFTFlow or RLFlow
    prepared = flow.prepare(config, masker, execution, resuming=False)

Adding a job type is one file in this folder (a class with the members of :class:`Flow`) plus one row in
:data:`FLOWS`. Nothing outside this module tests a job type as a string: config validation, ``train``,
``--resume``, the detached worker, the renderers and ``runs list`` all ask the flow.

A row is ``"module:Class"`` (imported when first asked for, so ``promptgym --help`` stays light and the
config module can read the table without importing the flows that import it) or a :class:`Flow` instance.
"""

from __future__ import annotations

import contextlib
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Protocol, runtime_checkable

if TYPE_CHECKING:  # the flows import these modules; at run time the table is read before them
    from rich.console import Console

    from promptgym.cli.execution import ExecutionSpec
    from promptgym.runs.events import Listener
    from promptgym.cli.render import Renderer
    from promptgym.runs.folder import RunFolder
    from promptgym.cli.secrets import Masker

DEFAULT_JOB_TYPE = "prompt_learning"


class JobConfig(Protocol):
    """A validated job config: a ``promptgym.cli.config.JobConfig``, which reads this table to validate itself,
    so it is named here by shape (the two modules do not need each other's types)."""

    job: Any

FLOWS: dict[str, str | Flow] = {
    "prompt_learning": "promptgym.cli.flows.prompt:PromptFlow",
    "sft": "promptgym.cli.flows.sft:SFTFlow",
    "rl": "promptgym.cli.flows.rl:RLFlow",
}
"""Job type (``job.type`` in a config, ``job_type`` in ``run.json``) -> its flow."""


@runtime_checkable
class Flow(Protocol):
    """What one job type supplies; ``promptgym train``, ``--resume`` and the worker are written once around it."""

    job_type: str
    settings_section: str | None
    """The config section of a weight job's own settings (``sft``, ``rl``), None for prompt learning."""
    override_keys: tuple[tuple[str, str], ...]
    """CLI flags (``model``, ``examples``, ``device``) that set a key of ``settings_section`` instead."""
    progress_unit: str
    """What a resume message counts: ``epoch``, ``step``, ``iteration``."""
    exports_sft_data: bool
    """Whether ``export-sft-data`` can distil its program."""

    def missing_sections(self, config: JobConfig) -> str | None:
        """Config validation: what this job type lacks (a sentence), or None."""

    def check_execution(self, execution: ExecutionSpec, config: JobConfig) -> str | None:
        """Whether the job can run there: a sentence for ``fail`` when it can't, else None."""

    def environment(self, config: JobConfig, masker: Masker, runs_dir: Path) -> ContextManager[JobConfig]:
        """The config with whatever the run needs running (a task app) for the block."""

    def prepare(self, config: JobConfig, masker: Masker, execution: ExecutionSpec, resuming: bool) -> Any:
        """Load, validate and preview (the "Resolved job" rows); exits 2 on a bad config. The result is handed
        to :meth:`execute` (None: execute prepares itself)."""

    def confirm_checks(self, prepared: Any, masker: Masker) -> None:
        """Checks shown after the preview, before asking to start (a new run only)."""

    def dry_run_note(self) -> str:
        """What ``--dry-run`` says of a new run."""

    def announce_resume(self, run: RunFolder, status: dict[str, Any]) -> bool:
        """Print where ``--resume`` continues; returns whether there is a checkpoint to resume from."""

    def resumes_in_worker(self, run: RunFolder) -> bool:
        """Whether a detached worker continues an earlier session of ``run``."""

    def release(self, prepared: Any) -> None:
        """Free what :meth:`prepare` loaded (a detached worker loads its own)."""

    def execute(self, run: RunFolder, config: JobConfig, masker: Masker, listeners: list[Listener] | None,
                resume: bool, prepared: Any, execution: ExecutionSpec | None) -> dict[str, Any]:
        """Train into the run folder; returns the final status (raises on interrupt or failure)."""

    def chart(self, console: Console | None) -> Renderer:
        """The live chart of ``--stream-format chart``."""

    def report(self, run: RunFolder, status: dict[str, Any], console: Console) -> str | None:
        """Print how the run ended; returns last words printed once the environment is stopped (or None)."""

    def model_name(self, config: JobConfig) -> str | None:
        """The name a weight job registers its model under (None: it registers none)."""

    def progress_cells(self, status: dict[str, Any]) -> tuple[str, str, str, str]:
        """``runs list``: (progress, baseline, final, model) in the job's own terms."""


class UnknownJobType(KeyError):
    """A job type no row of :data:`FLOWS` names."""


def flow_for(job_type: str | None) -> Flow:
    """The flow of a job type (None: an old run.json without one, which is prompt learning)."""
    try:
        row = FLOWS[job_type or DEFAULT_JOB_TYPE]
    except KeyError:
        raise UnknownJobType(job_type) from None
    if isinstance(row, str):
        module, name = row.split(":")
        row = FLOWS[job_type or DEFAULT_JOB_TYPE] = getattr(importlib.import_module(module), name)()
    return row


def known_flow(job_type: Any) -> Flow | None:
    """The flow of a job type, or None when it is not one (a raw config before validation)."""
    if not isinstance(job_type, str):
        return None
    with contextlib.suppress(UnknownJobType):
        return flow_for(job_type)
    return None


def job_types() -> list[str]:
    return list(FLOWS)


def flow_of_run(status: dict[str, Any]) -> Flow:
    """The flow of a run from its ``run.json`` (no or an unknown ``job_type``: prompt learning, as before types)."""
    return known_flow(status.get("job_type")) or flow_for(DEFAULT_JOB_TYPE)
