"""The TOML job config: pydantic models, loading, overrides, clear errors.

    config = load_config(["run.toml"], overrides={"model": "local/smollm2-135m-instruct"})
    config.job.type          # a row of promptgym.cli.flows.FLOWS: "prompt_learning" | "sft" | "rl"

Errors name the file, the key path (``training.epochs``) and what was expected.
Secrets never live in a config: name the environment variable (``api_key_env``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from promptgym.cli.flows import DEFAULT_JOB_TYPE, flow_for, job_types, known_flow
from promptgym.core.identifiers import normalize_identifier
from promptgym.finetune.rl.settings import RLSettings
from promptgym.finetune.settings import SFTSettings
from promptgym.training.logger_checks import folder_problem
from promptgym.training.mlflow_logger import tracking_uri_of

FieldType = Literal["str", "int", "float", "bool", "list[str]"]


class ConfigError(ValueError):
    """A config that can't be used; the message names the file and key path."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobSection(Section):
    type: str = DEFAULT_JOB_TYPE
    name: str = "run"
    seed: int = Field(0, ge=0)

    @field_validator("type")
    @classmethod
    def _a_flow(cls, value: str) -> str:
        if known_flow(value) is None:
            names = [repr(name) for name in job_types()]
            raise ValueError(f"expected {', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else
                             f"expected {names[0]}")
        return value


class PriceSpec(Section):
    """Dollars per million tokens of one model (see docs/cost.md)."""

    input_per_mtok: float = Field(..., ge=0)
    output_per_mtok: float = Field(..., ge=0)
    cached_input_per_mtok: float | None = Field(None, ge=0)


class BudgetSection(Section):
    """Caps on a run's spend."""

    max_usd: float | None = Field(None, gt=0, description="stop before a model call would take the run past this "
                                                          "many dollars (baseline and final evaluations included)")


class ModelSection(Section):
    """The language model of the program's Generators."""

    name: str = "local/qwen2.5-coder-0.5b-instruct"
    api_base: str | None = Field(None, description="http(s) URL of the server")
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    temperature: float = 0.0
    max_tokens: int = Field(256, ge=1)
    concurrency: int | None = Field(None, ge=1)
    cache: bool = True
    price: "PriceSpec | None" = Field(None, description="dollars per million tokens (default: the price table)")

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a model string 'provider/model' (e.g. 'local/qwen2.5-coder-0.5b-instruct'); "
                             "leave the key out for the default")
        return value

    @field_validator("api_base")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("expected an http(s) URL such as http://127.0.0.1:8080/v1")
        return value


class FieldSpec(Section):
    type: FieldType = "str"
    description: str = ""


class GeneratorSpec(Section):
    """A one-Generator program described in the config (no Python needed)."""

    kind: Literal["generator", "chain_of_thought"] = "generator"
    name: str = "generator"
    instructions: str | None = None
    inputs: dict[str, FieldSpec | str] = Field(default_factory=dict)
    outputs: dict[str, FieldSpec | str] = Field(default_factory=dict)


class ProgramSection(Section):
    """Exactly one of ``path`` (saved program JSON), ``factory`` (``module:function``) or ``generator``."""

    path: str | None = None
    factory: str | None = None
    factory_args: dict[str, Any] = Field(default_factory=dict)
    generator: GeneratorSpec | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "ProgramSection":
        given = [name for name in ("path", "factory", "generator") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"set exactly one of path, factory or [program.generator]; got {given or 'none'}")
        if self.factory is not None and ":" not in self.factory:
            raise ValueError(f"factory must look like 'package.module:function', got {self.factory!r}")
        return self


class DataSection(Section):
    """Where examples come from: a built-in dataset, JSONL/CSV files, or a task app."""

    dataset: str | None = None
    dataset_args: dict[str, Any] = Field(default_factory=dict)
    train: str | None = None
    validation: str | None = None
    test: str | None = None
    x_fields: dict[str, str] | None = None
    y_fields: dict[str, str] | None = None
    task_url: str | None = None
    task_app: str | None = Field(None, description="a task app's Python file: started on a free 127.0.0.1 port for the run")
    task_api_key_env: str = "TASK_APP_API_KEY"
    task_concurrency: int = Field(4, ge=1)
    task_timeout: float = Field(60.0, gt=0)
    task_retries: int = Field(2, ge=0)
    train_seeds: list[int] | None = None
    validation_seeds: list[int] | None = None
    test_seeds: list[int] | None = None
    traces: str | None = Field(None, description="a trace store (serve --record DIR: the folder, or its traces.db)")
    traces_program: str | None = Field(None, description="only traces of this served program")
    traces_version: str | None = Field(None, description="only traces of this program version")
    traces_since: float | None = Field(None, description="only traces recorded at or after this Unix time")
    traces_min_rating: float | None = Field(None, description="a trace rated at least this keeps its own output "
                                                              "as its label (corrections always count)")
    traces_holdout: float = Field(0.2, ge=0, lt=1, description="the newest fraction of traces, kept as the test set")
    examples: int | None = Field(None, ge=1, description="use only the first N training examples")
    test_examples: int | None = Field(None, ge=1)
    validation_split: float = Field(0.2, ge=0, lt=1)

    @model_validator(mode="after")
    def _one_source(self) -> "DataSection":
        given = [name for name in ("dataset", "train", "traces", "task_url", "task_app")
                 if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("set exactly one of dataset, train (a JSONL/CSV file), traces (a trace store), task_url "
                             f"or task_app (a task app's Python file); got {given or 'none'}")
        return self

    @property
    def source(self) -> str:
        if self.traces:
            return "traces"
        return "dataset" if self.dataset else "task_app" if self.task_url or self.task_app else "files"

    @property
    def uses_task_app(self) -> bool:
        return self.task_url is not None or self.task_app is not None


class KnowledgeSection(Section):
    """The knowledge base a RAG program searches (docs/knowledge.md): opened, or built/refreshed from ``sources``."""

    path: str = Field(..., description="the DuckDB file (`promptgym kb build` makes one)")
    embedding_model: str | dict[str, Any] | None = Field(
        None, description="a model string, 'none', or {class_name, config}; default: the one the file was built with")
    sources: list[str] = Field(default_factory=list, description="files/folders ingested before the run (resumable)")
    chunk_size: int = Field(1000, ge=50)
    overlap: int = Field(100, ge=0)
    table: str = "Chunk"
    k: int = Field(5, ge=1, description="chunks retrieved per query ([program.generator] programs)")
    search_type: Literal["hybrid_fts", "fulltext", "similarity"] = "hybrid_fts"

    @model_validator(mode="after")
    def _overlap_below_chunk_size(self) -> "KnowledgeSection":
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be below chunk_size ({self.chunk_size})")
        return self


class ScorerSpec(Section):
    name: str = "exactmatch"
    params: dict[str, Any] = Field(default_factory=dict)


class OptimizerStage(Section):
    """One ``[[optimizer.stages]]`` table: an optimizer of a chain."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class OptimizerSection(Section):
    name: str = "randomfewshot"
    params: dict[str, Any] = Field(default_factory=dict)
    stages: list[OptimizerStage] | None = Field(None, description="optimizers run one after another in one fit() "
                                                "(name then defaults to \"sequence\"), e.g. knnfewshot, finetune, knnfewshot")

    @model_validator(mode="after")
    def _stages_make_a_sequence(self) -> "OptimizerSection":
        if self.stages is not None:
            if not self.stages:
                raise ValueError("optimizer.stages: give at least one [[optimizer.stages]] table")
            if "name" in self.model_fields_set and normalize_identifier(self.name) != "sequence":
                raise ValueError(f"optimizer.name = {self.name!r} with [[optimizer.stages]]: stages make a "
                                 "\"sequence\"; leave name out or set it to \"sequence\"")
            self.name = "sequence"
        return self


class EarlyStoppingSpec(Section):
    monitor: str = "val_reward"
    patience: int = Field(2, ge=1)
    min_delta: float = 0.0


class TrainingSection(Section):
    epochs: int = Field(2, ge=1)
    batch_size: int = Field(4, ge=1)
    minibatch_size: int = Field(4, ge=1)
    validation_batch_size: int = Field(32, ge=1)
    validation_freq: int = Field(1, ge=1)
    shuffle: bool = False
    max_errors: int | None = Field(None, ge=0)
    evaluate_baseline: bool = True
    early_stopping: EarlyStoppingSpec | None = None


class MLflowSpec(Section):
    tracking_uri: str = Field("mlruns", description="a server URL, or a local folder (MLflow's file store)")
    experiment: str | None = Field(None, description="default: job.name")
    run_name: str | None = Field(None, description="default: the run id")
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("tracking_uri")
    @classmethod
    def _writable_file_store(cls, value: str) -> str:
        # A folder MLflow can't write would fail at the run's first metric; say so before the run starts.
        uri = tracking_uri_of(value) or ""
        problem = folder_problem(url2pathname(urlsplit(uri).path)) if uri.startswith("file:") else None
        if problem is not None:
            raise ValueError(f"MLflow can't keep its file store there: {problem}")
        return value


class LoggingSection(Section):
    """Where a run also reports, besides its run folder (docs/observability.md)."""

    mlflow: MLflowSpec | None = None
    tensorboard: str | None = Field(None, description="a TensorBoard log folder (one subfolder per run)")
    otel: bool = Field(False, description="OpenTelemetry spans of every call in the run folder's spans.jsonl")

    @field_validator("tensorboard")
    @classmethod
    def _writable_log_folder(cls, value: str | None) -> str | None:
        problem = folder_problem(value) if value else None
        if problem is not None:
            raise ValueError(f"TensorBoard can't write its logs there: {problem}")
        return value


class JobConfig(Section):
    job: JobSection = Field(default_factory=JobSection)
    model: ModelSection = Field(default_factory=ModelSection)
    program: ProgramSection | None = None
    knowledge: KnowledgeSection | None = None
    data: DataSection | None = None
    reward: ScorerSpec = Field(default_factory=ScorerSpec)
    metrics: list[ScorerSpec] = Field(default_factory=list)
    optimizer: OptimizerSection = Field(default_factory=OptimizerSection)
    training: TrainingSection = Field(default_factory=TrainingSection)
    sft: SFTSettings | None = None
    rl: RLSettings | None = None
    logging: LoggingSection = Field(default_factory=LoggingSection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    prices: dict[str, PriceSpec] = Field(default_factory=dict, description="prices by model string, for models "
                                                                         "the table lacks or that you pay otherwise")
    flow_sections: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude=True)
    """The settings sections of flows added to the table (``[count]`` of a ``count`` flow), as written; the
    built-in flows' sections are the typed fields above."""

    @model_validator(mode="before")
    @classmethod
    def _flows_own_sections(cls, raw: Any) -> Any:
        unknown = [key for key in raw if key not in cls.model_fields] if isinstance(raw, dict) else []
        if not unknown:
            return raw
        owned = {flow_for(job_type).settings_section for job_type in job_types()}
        sections = {key: raw[key] for key in unknown if key in owned and isinstance(raw[key], dict)}
        return {**{key: value for key, value in raw.items() if key not in sections}, "flow_sections": sections}

    @model_validator(mode="after")
    def _sections_for_job(self) -> "JobConfig":
        problem = flow_for(self.job.type).missing_sections(self)
        if problem:
            raise ValueError(problem)
        return self


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = _deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def describe_validation_error(error: pydantic.ValidationError, source: str) -> str:
    """One line per problem: ``run.toml: training.epochs: expected ... (got 0)``."""
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"] if not str(part).startswith("function-after")) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key (check the spelling; see docs/cli.md for the schema)"
        elif item["type"] == "literal_error":
            message = f"expected {item['ctx']['expected']}"
        got = item.get("input")
        shown = "" if item["type"] in ("missing", "extra_forbidden") or isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"{source}: {path}: {message}{shown}")
    return "\n".join(lines)


def read_toml(path: str | Path) -> dict[str, Any]:
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"{source}: no such config file" + (" (it is a folder)" if source.is_dir() else ""))
    data = source.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ConfigError(f"{source}: line {line}: not UTF-8 text (byte {data[error.start]:#04x}); "
                          "save the file as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: invalid TOML: {error}") from None


PATH_KEYS = (("data", "train"), ("data", "validation"), ("data", "test"), ("data", "traces"), ("data", "task_app"), ("program", "path"),
             ("sft", "train_file"), ("sft", "validation_file"), ("logging", "tensorboard"), ("knowledge", "path"))


def absolute_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """File paths in a config are relative to the config file, so a run can resume from anywhere."""
    for section, key in PATH_KEYS:
        value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            raw[section][key] = str((base / value).resolve())
    knowledge = raw.get("knowledge")
    if isinstance(knowledge, dict) and isinstance(knowledge.get("sources"), list):
        knowledge["sources"] = [str((base / item).resolve()) if isinstance(item, str) and item
                                and not Path(item).expanduser().is_absolute() else item
                                for item in knowledge["sources"]]
    return raw


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """CLI flags (``--model``, ``--dataset``, ``--examples``, ``--task-url``, ``--seed``, ``--device``) win over the files.

    In an sft job ``--model`` names the base model and ``--examples`` keeps the first N training rows; in an
    rl job ``--model`` names the base model (``--examples`` keeps the first N training seeds, as in prompt learning).
    """
    raw = _deep_merge(raw, {})
    given_type = raw["job"].get("type") if isinstance(raw.get("job"), dict) else None
    flow = known_flow(given_type or DEFAULT_JOB_TYPE)
    # The flow's own settings section takes some flags (flag -> key); the others apply as in prompt learning.
    section = flow.settings_section if flow is not None else None
    own = raw.get(section) if section is not None and isinstance(raw.get(section), dict) else None
    if overrides.get("device") and own is None:
        raise ConfigError(f"--device {overrides['device']}: only sft and rl jobs train weights on a device "
                          f"(this job's type is {given_type or DEFAULT_JOB_TYPE!r})")
    if flow is not None and own is not None:
        for flag, key in flow.override_keys:
            if overrides.get(flag):
                own[key] = overrides[flag]
        overrides = {key: value for key, value in overrides.items() if key not in dict(flow.override_keys)}
    if overrides.get("model"):
        raw.setdefault("model", {})["name"] = overrides["model"]
    if overrides.get("seed") is not None:
        raw.setdefault("job", {})["seed"] = overrides["seed"]
    data = raw.setdefault("data", {}) if any(overrides.get(k) for k in ("dataset", "task_url", "examples")) else None
    if data is not None:
        if overrides.get("dataset"):
            data.update(dataset=overrides["dataset"], train=None, task_url=None, task_app=None)
        if overrides.get("task_url"):
            data.update(task_url=overrides["task_url"], dataset=None, train=None, task_app=None)
        if overrides.get("examples"):
            data["examples"] = overrides["examples"]
        for key in [key for key, value in data.items() if value is None]:
            del data[key]
    return raw


def load_config(paths: list[str | Path], overrides: dict[str, Any] | None = None) -> JobConfig:
    """Merge the TOML files in order, apply CLI overrides, validate."""
    if not paths:
        raise ConfigError("no config file given")
    raw: dict[str, Any] = {}
    for path in paths:
        raw = _deep_merge(raw, absolute_paths(read_toml(path), Path(path).resolve().parent))
    raw = apply_overrides(raw, overrides or {})
    return validate_config(raw, ", ".join(str(path) for path in paths))


def validate_config(raw: dict[str, Any], source: str = "config") -> JobConfig:
    try:
        return JobConfig.model_validate(raw)
    except pydantic.ValidationError as error:
        raise ConfigError(describe_validation_error(error, source)) from None


def resolved_dict(config: JobConfig) -> dict[str, Any]:
    """The config as plain data (no None values, which TOML can't hold)."""
    def prune(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: prune(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [prune(v) for v in value]
        return value

    return prune({**config.model_dump(mode="json"), **config.flow_sections})
