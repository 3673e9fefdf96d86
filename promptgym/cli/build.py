"""Config -> the same library objects a Python user builds (LM, program, data, reward, optimizer).

    job = await build_run_plan(config)
    job.program.compile(reward=job.reward, optimizer=job.optimizer, metrics=job.metrics)
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from promptgym import datasets
from promptgym import metrics as metrics_module
from promptgym import optimizers
from promptgym import rewards as rewards_module
from promptgym.cli.commands.kb_config import attach_knowledge_base, open_knowledge_base, retriever_for
from promptgym.cli.config import ConfigError, DataSection, FieldSpec, GeneratorSpec, JobConfig
from promptgym.core.data_model import DataModel
from promptgym.core.identifiers import normalize_identifier
from promptgym.core.schema import data_model_from_schema
from promptgym.datasets import DatasetError, from_traces, load_csv, load_jsonl
from promptgym.lm.prices import set_prices
from promptgym.lm.language_model import LanguageModel
from promptgym.metrics import Metric
from promptgym.modules import ChainOfThought, Generator, Input
from promptgym.optimizers import Optimizer
from promptgym.programs import Sequential
from promptgym.programs.program import Program
from promptgym.rewards import Reward
from promptgym.taskapp import TaskAppClient, TaskAppError, TaskAppProgram, TaskAppReward, seeds

JSON_TYPES = {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
              "bool": {"type": "boolean"}, "list[str]": {"type": "array", "items": {"type": "string"}}}


@dataclass
class Data:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray | None = None
    y_val: np.ndarray | None = None
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    input_model: type[DataModel] | None = None
    output_model: type[DataModel] | None = None
    task_info: Any = None

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.x_train), "validation": len(self.x_val) if self.x_val is not None else 0,
                "test": len(self.x_test) if self.x_test is not None else 0}


@dataclass
class RunPlan:
    """A prompt-learning job file made ready to run: the program, its data, reward, optimizer and metrics."""

    config: JobConfig
    program: Program
    data: Data
    reward: Reward
    optimizer: Optimizer
    metrics: list[Metric] = field(default_factory=list)


def build_language_model(config: JobConfig) -> LanguageModel:
    section = config.model
    api_key = os.environ.get(section.api_key_env) if section.api_key_env else None
    if section.api_key_env and not api_key:
        raise ConfigError(f"model.api_key_env: environment variable {section.api_key_env} is not set "
                          "(put it in your .env and pass --env-file)")
    try:
        return LanguageModel(model=section.name, api_base=section.api_base, api_key=api_key, api_key_env=section.api_key_env,
                             temperature=section.temperature, max_tokens=section.max_tokens,
                             concurrency=section.concurrency, cache=section.cache,
                             price=section.price.model_dump(exclude_none=True) if section.price else None)
    except Exception as error:  # noqa: BLE001 - surface as a config error naming the key
        raise ConfigError(f"model.name: {error}") from None


def _field_schema(name: str, spec: FieldSpec | str) -> dict[str, Any]:
    spec = FieldSpec(description=spec) if isinstance(spec, str) else spec
    return {**JSON_TYPES[spec.type], "description": spec.description or name}


def data_model_from_fields(title: str, fields: dict[str, FieldSpec | str]) -> type[DataModel]:
    schema = {"title": title, "type": "object", "required": list(fields),
              "properties": {name: _field_schema(name, spec) for name, spec in fields.items()}}
    return data_model_from_schema(schema)


def io_models(config: JobConfig) -> tuple[type[DataModel] | None, type[DataModel] | None]:
    """Input/output DataModels: from the generator spec, else from the built-in dataset."""
    spec = config.program.generator if config.program else None
    inputs = data_model_from_fields("Inputs", spec.inputs) if spec and spec.inputs else None
    outputs = data_model_from_fields("Outputs", spec.outputs) if spec and spec.outputs else None
    if config.data and config.data.dataset and (inputs is None or outputs is None):
        module = dataset_module(config.data.dataset)
        inputs = inputs or module.get_input_data_model()
        outputs = outputs or module.get_output_data_model()
    return inputs, outputs


def dataset_module(name: str) -> Any:
    module = getattr(datasets, name, None)
    if module is None or not hasattr(module, "load_data"):
        choices = ", ".join(n for n in datasets.__all__ if hasattr(getattr(datasets, n), "load_data"))
        raise ConfigError(f"data.dataset: unknown dataset {name!r}; built-in datasets: {choices}")
    return module


def build_generator_program(spec: GeneratorSpec, inputs: type[DataModel] | None, outputs: type[DataModel] | None,
                            lm: LanguageModel, retriever: Any = None) -> Program:
    """``Input -> [retriever ->] Generator``: the retriever is the ``[knowledge]`` table's (a RAG program)."""
    if inputs is None or outputs is None:
        raise ConfigError("program.generator: give inputs and outputs fields (or use a built-in data.dataset)")
    cls = ChainOfThought if spec.kind == "chain_of_thought" else Generator
    module = cls(data_model=outputs, language_model=lm, instructions=spec.instructions, name=spec.name)
    steps = [Input(data_model=inputs), *([retriever] if retriever is not None else []), module]
    return Sequential(steps, name=spec.name + "_program")


def load_factory(reference: str) -> Any:
    module_name, _, function_name = reference.partition(":")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # so `mypkg.module:build` works from the project folder
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - a missing module, or one that fails on import
        raise ConfigError(f"program.factory: can't import {module_name!r} ({type(error).__name__}: {error})") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ConfigError(f"program.factory: {module_name!r} has no function {function_name!r}")
    return function


async def call_factory(reference: str, kwargs: dict[str, Any], lm: LanguageModel,
                       knowledge_base: Any = None) -> Program:
    """The Program ``module:function(**factory_args)`` returns (awaited if async), or a ConfigError saying why not.

    It gets ``language_model=`` (and the ``[knowledge]`` table's ``knowledge_base=``) when it takes them."""
    function = load_factory(reference)
    try:
        parameters = inspect.signature(function).parameters
        for name, value in (("language_model", lm), ("knowledge_base", knowledge_base)):
            if name in parameters and value is not None:
                kwargs.setdefault(name, value)
    except (TypeError, ValueError):  # a callable without a signature: call it as it is
        pass
    try:
        program = function(**kwargs)
        if inspect.isawaitable(program):
            program = await program
    except Exception as error:  # noqa: BLE001 - the user's code failed: say where, not a traceback
        given = ", ".join(f"{key}={value!r}" for key, value in kwargs.items() if key != "language_model")
        raise ConfigError(f"program.factory: {reference}({given}) raised {type(error).__name__}: {error}") from None
    if not isinstance(program, Program):
        raise ConfigError(f"program.factory: {reference} returned {type(program).__name__}, expected a promptgym Program")
    return program


async def build_program(config: JobConfig, lm: LanguageModel, data: Data) -> Program:
    section = config.program
    assert section is not None
    knowledge = (await open_knowledge_base(config.knowledge))[0] if config.knowledge is not None else None
    if section.path:
        if not Path(section.path).is_file():
            raise ConfigError(f"program.path: {section.path}: no such file"
                              + (" (it is a folder)" if Path(section.path).is_dir() else ""))
        try:
            program = Program.load(section.path)
        except Exception as error:  # noqa: BLE001 - any unreadable program file is this config key's problem
            message = str(error) if section.path in str(error) else f"{section.path}: {type(error).__name__}: {error}"
            raise ConfigError(f"program.path: {message}") from None
        program.training_setup = None  # the config's reward/optimizer apply, not the file's
        return attach_knowledge_base(program, knowledge, "program.path") if knowledge is not None else program
    if section.factory:
        args = dict(section.factory_args)
        program = await call_factory(section.factory, args, lm, knowledge)
        if knowledge is not None and args.get("knowledge_base") is not knowledge:
            attach_knowledge_base(program, knowledge, "program.factory")
        return program
    assert section.generator is not None
    inputs, outputs = io_models(config)
    retriever = retriever_for(config.knowledge, knowledge, lm) if config.knowledge and knowledge else None
    return build_generator_program(section.generator, inputs or data.input_model, outputs or data.output_model, lm,
                                   retriever)


def _limit(x: np.ndarray, y: np.ndarray, count: int | None) -> tuple[np.ndarray, np.ndarray]:
    return (x[:count], y[:count]) if count else (x, y)


def load_file(path: str, section: DataSection, inputs: type[DataModel], outputs: type[DataModel], key: str) -> Any:
    loader = load_csv if path.endswith((".csv", ".csv.gz")) else load_jsonl
    try:
        x, y = loader(path, inputs, outputs, x_fields=section.x_fields, y_fields=section.y_fields)
    except DatasetError as error:
        raise ConfigError(f"data.{key}: {error}") from None
    if not len(x):
        raise ConfigError(f"data.{key}: {path}: no examples in the file")
    return x, y


async def build_data(config: JobConfig) -> Data:
    section = config.data
    assert section is not None
    if section.task_url:
        return await build_task_app_data(config)
    inputs, outputs = io_models(config)
    if section.dataset:
        module = dataset_module(section.dataset)
        args = dict(section.dataset_args)
        if "seed" in inspect.signature(module.load_data).parameters:
            args.setdefault("seed", config.job.seed)
        try:
            (x_train, y_train), (x_test, y_test) = module.load_data(**args)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"data.dataset_args: {error}") from None
        x_train, y_train = _limit(x_train, y_train, section.examples)
        x_test, y_test = _limit(x_test, y_test, section.test_examples)
        return Data(x_train, y_train, x_test=x_test, y_test=y_test, input_model=inputs, output_model=outputs)
    if inputs is None or outputs is None:
        if config.program and config.program.generator is None:
            program_models = await _program_models(config)
            inputs, outputs = inputs or program_models[0], outputs or program_models[1]
        if inputs is None or outputs is None:
            raise ConfigError("data.train: to read files, the program's input and output fields must be known "
                              "(program.generator.inputs / outputs)")
    if section.traces:
        return load_traces(section, inputs, outputs)
    x_train, y_train = _limit(*load_file(section.train, section, inputs, outputs, "train"), section.examples)
    data = Data(x_train, y_train, input_model=inputs, output_model=outputs)
    if section.validation:
        data.x_val, data.y_val = load_file(section.validation, section, inputs, outputs, "validation")
    if section.test:
        data.x_test, data.y_test = _limit(*load_file(section.test, section, inputs, outputs, "test"), section.test_examples)
    return data


def load_traces(section: DataSection, inputs: Any, outputs: Any) -> Data:
    """``[data] traces``: labelled served calls; the newest ``traces_holdout`` of them are the test set."""
    filters = {"program": section.traces_program, "version": section.traces_version, "since": section.traces_since,
               "min_rating": section.traces_min_rating}
    try:
        if section.traces_holdout:
            (x_train, y_train), (x_test, y_test) = from_traces(section.traces, inputs, outputs,
                                                               holdout=section.traces_holdout, **filters)
        else:
            (x_train, y_train), x_test = from_traces(section.traces, inputs, outputs, **filters), []
            y_test = []
    except (DatasetError, ValueError) as error:
        raise ConfigError(f"data.traces: {error}") from None
    if not len(x_train):
        raise ConfigError(f"data.traces: {section.traces}: no labelled traces (a correction, or a rating of at least "
                          "traces_min_rating) match the filters")
    x_train, y_train = _limit(x_train, y_train, section.examples)
    data = Data(x_train, y_train, input_model=inputs, output_model=outputs)
    if len(x_test):
        data.x_test, data.y_test = _limit(x_test, y_test, section.test_examples)
    return data


async def _program_models(config: JobConfig) -> tuple[Any, Any]:
    program = await build_program(config, build_language_model(config), Data(np.empty(0, object), np.empty(0, object)))
    return program.input_data_model, program.output_data_model


async def build_task_app_data(config: JobConfig) -> Data:
    section = config.data
    assert section is not None and section.task_url is not None
    client = TaskAppClient(section.task_url, api_key=os.environ.get(section.task_api_key_env),
                           timeout=min(section.task_timeout, 10.0), retries=section.task_retries, backoff_s=0.2)
    try:
        info = await client.check()
    except TaskAppError as error:
        raise ConfigError(f"data.task_url: {error}") from None
    train = section.train_seeds or info.splits.get("train", [])
    if not train:
        raise ConfigError(f"data.train_seeds: the task app {info.name!r} lists no 'train' seeds; set data.train_seeds")
    x_train, y_train = _limit(*seeds(train, "train"), section.examples)
    data = Data(x_train, y_train, task_info=info)
    validation = section.validation_seeds or info.splits.get("validation")
    if validation:
        data.x_val, data.y_val = seeds(validation, "validation")
    test = section.test_seeds or info.splits.get("test")
    if test:
        data.x_test, data.y_test = _limit(*seeds(test, "test"), section.test_examples)
    return data


def build_scorers(config: JobConfig) -> tuple[Reward, list[Metric]]:
    def resolve(registry: Any, spec: Any, key: str) -> Any:
        try:
            return registry.get({"class_name": spec.name, "config": spec.params} if spec.params else spec.name)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{key}: {error}") from None

    if config.data and config.data.task_url:
        return TaskAppReward(), [resolve(metrics_module, spec, f"metrics.{i}") for i, spec in enumerate(config.metrics)]
    reward = resolve(rewards_module, config.reward, "reward")
    return reward, [resolve(metrics_module, spec, f"metrics.{i}") for i, spec in enumerate(config.metrics)]


def build_optimizer(config: JobConfig) -> Optimizer:
    def spec(name: str, given: dict[str, Any]) -> dict[str, Any]:
        params = dict(given)
        cls = optimizers.OPTIMIZERS.get(normalize_identifier(name))
        if isinstance(cls, type) and "seed" in inspect.signature(cls.__init__).parameters:
            params.setdefault("seed", config.job.seed)
        return {"class_name": name, "config": params}

    if config.optimizer.stages:
        stages = []
        for index, stage in enumerate(config.optimizer.stages):
            try:
                stages.append(optimizers.get(spec(stage.name, stage.params)))
            except (ValueError, TypeError) as error:
                given = ", ".join(f"{key}={value!r}" for key, value in stage.params.items())
                raise ConfigError(f"optimizer.stages[{index}] ({stage.name}): {error}"
                                  + (f" (params: {given})" if given else "")) from None
        return optimizers.Sequence(stages)
    try:
        return optimizers.get(spec(config.optimizer.name, config.optimizer.params))
    except (ValueError, TypeError) as error:
        given = ", ".join(f"{key}={value!r}" for key, value in config.optimizer.params.items())
        raise ConfigError(f"optimizer: {error}" + (f" (optimizer.params: {given})" if given else "")) from None


async def build_run_plan(config: JobConfig) -> RunPlan:
    """Everything ``fit()`` needs for a prompt-learning config (the flows that build one: ``PromptFlow``,
    ``export-sft-data``), or a ConfigError naming the key at fault."""
    set_prices({model: spec.model_dump(exclude_none=True) for model, spec in config.prices.items()})
    data = await build_data(config)
    if config.data and config.data.task_url:
        program = TaskAppProgram(task_url=config.data.task_url, modules=[m.model_dump() for m in data.task_info.modules],
                                 model=config.model.name, inference_url=config.model.api_base,
                                 api_key_env=config.data.task_api_key_env, concurrency=config.data.task_concurrency,
                                 timeout=config.data.task_timeout, retries=config.data.task_retries)
    else:
        program = await build_program(config, build_language_model(config), data)
    reward, metrics = build_scorers(config)
    return RunPlan(config, program, data, reward, build_optimizer(config), metrics)
