"""``import synalinks`` -> promptgym, by public name only.

The shim implements nothing: it resolves each name a synalinks user (or a
synalinks test) imports to the object promptgym exports under the same
public path, and fails with ImportError/AttributeError when promptgym has no
such name.

- ``synalinks`` is promptgym itself; ``synalinks.X`` is ``promptgym.X``.
- ``synalinks.src.M`` (synalinks' internal modules, which its tests import)
  is a proxy: ``from synalinks.src.M import N`` finds the public path of
  ``N`` (:mod:`public_api`) and returns promptgym's object at that path.
- ``synalinks.src.testing`` is the harness's test infrastructure.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

from public_api import PublicApi

_MISSING = object()
MISSING_NAMES: set[str] = set()
"""Public names a test imported that promptgym lacks (reported by the runner)."""


def resolve_public(path: str) -> Any:
    """promptgym's object at public path ``synalinks.a.b.C`` (AttributeError naming it if absent)."""
    parts = path.split(".")[1:]
    obj: Any = importlib.import_module("promptgym")
    module_name = "promptgym"
    for part in parts:
        value = getattr(obj, part, _MISSING)
        if value is _MISSING and isinstance(obj, types.ModuleType):
            try:
                value = importlib.import_module(f"{module_name}.{part}")
            except ModuleNotFoundError:
                value = _MISSING
        if value is _MISSING:
            raise AttributeError(f"promptgym has no {path.replace('synalinks', 'promptgym', 1)}")
        obj = value
        module_name = f"{module_name}.{part}"
    return obj


INTERNAL_MODULES: dict[str, str] = {
    "synalinks.src.callbacks.monitor": "promptgym.training.monitor",
    "synalinks.src.trainers.compile_utils": "promptgym.training.compile_utils",
}
"""synalinks' internal modules whose promptgym counterpart is one module (tests patch their globals)."""

INTERNAL_ALIASES: dict[str, str] = {
    "synalinks.src.trainers.trainer.Trainer": "promptgym.training.trainer.Trainer",
    "synalinks.src.programs.Functional": "promptgym.programs.Functional",
    "synalinks.src.metrics.f_score_metrics.ListFBetaScore": "promptgym.metrics.ListFBetaScore",
    "synalinks.src.metrics.f_score_metrics.ListF1Score": "promptgym.metrics.ListF1Score",
    "synalinks.src.utils.file_utils.join": "os.path.join",
    "synalinks.src.utils.file_utils.exists": "os.path.exists",
    "synalinks.src.optimizers.optimizer.Optimizer": "promptgym.optimizers.Optimizer",
    "synalinks.src.programs.functional.Functional": "promptgym.programs.Functional",
    "synalinks.src.backend.standardize_schema": "promptgym.core.json_ops.standardize_schema",
    "synalinks.src.backend.dynamic_enum": "promptgym.core.json_ops.dynamic_enum",
    "synalinks.src.backend.dynamic_enum_array": "promptgym.core.json_ops.dynamic_enum_array",
    # the phase of a model call (synalinks' op_scope is promptgym's lm_phase) and its wall clock
    "synalinks.src.backend.common.op_scope.op_scope": "promptgym.lm.usage.lm_phase",
    "synalinks.src.backend.common.op_scope.current_op_scope": "promptgym.lm.usage.current_op_scope",
    "synalinks.src.backend.common.op_scope.read_phase_wall_clock_s": "promptgym.lm.usage.read_phase_wall_clock_s",
    "synalinks.src.backend.common.op_scope._add_phase_wall_clock_s": "promptgym.lm.usage.add_phase_wall_clock_s",
    "synalinks.src.backend.common.op_scope._OP_SCOPE": "promptgym.lm.usage._current_phase",
    "synalinks.src.backend.common.op_scope.time": "time",
    "synalinks.src.rewards.lm_as_judge.LMAsJudgeProgram": "promptgym.rewards.judge_program.LMAsJudgeProgram",
    "synalinks.src.rewards.reward.reduce_values": "promptgym.rewards.reduction.reduce_values",
    "synalinks.src.rewards.reward.reduce_rewards": "promptgym.rewards.reduction.reduce_rewards",
    "synalinks.src.rewards.reward.apply_masks": "promptgym.rewards.reduction.apply_masks",
    "synalinks.src.metrics.lm_metrics._collect_language_models":
        "promptgym.metrics.operational.collect_language_models",
    "synalinks.src.metrics.em_metrics._collect_embedding_models":
        "promptgym.metrics.operational.collect_embedding_models",
    "synalinks.src.modules.core.tool.json_schema_type": "promptgym.modules.tool.json_schema_type",
    "synalinks.src.modules.core.multi_decision.MultiDecisionAnswer": "promptgym.modules.decision.MultiDecisionAnswer",
    "synalinks.src.modules.language_models.language_model.StreamingIterator": "promptgym.lm.streaming.StreamingIterator",
    # a tool's OpenAI wire declaration: synalinks' private helper, promptgym's Tool.openai_tool (called as Tool.openai_tool(tool))
    "synalinks.src.modules.language_models.language_model._tool_to_wire": "promptgym.modules.tool.Tool.openai_tool",
    # OMEGA's request texts and its embedding distance (promptgym keeps them beside OMEGA, in omega_*.py)
    "synalinks.src.optimizers.omega.base_instructions": "promptgym.optimizers.omega_prompts.base_instructions",
    "synalinks.src.optimizers.omega.mutation_instructions": "promptgym.optimizers.omega_prompts.mutation_instructions",
    "synalinks.src.optimizers.omega.crossover_instructions":
        "promptgym.optimizers.omega_prompts.crossover_instructions",
    "synalinks.src.optimizers.omega.similarity_distance": "promptgym.optimizers.omega_population.similarity_distance",
}
"""synalinks' internal names that have a promptgym counterpart of the same concept (not public in
synalinks, but its tests import them): ``synalinks.src.M.N`` -> ``promptgym.P.N``."""


def _resolve_promptgym(dotted: str) -> Any:
    """The object at ``promptgym.a.b.C`` (a module path, then attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ModuleNotFoundError(dotted)


class MissingName:
    """A public synalinks name promptgym lacks, imported by a test file.

    Importing it succeeds, so the file's other tests still run; any use
    (call, attribute, subclassing) raises, failing only the tests that use it.
    """

    def __init__(self, path: Any, error: str | None = None) -> None:
        if error is None:
            # `Missing.__init__(instance)` from a subclass's __init__ (`class P(Missing, Generator)`): a use
            self._fail()
        object.__setattr__(self, "_error", error)

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise AttributeError(object.__getattribute__(self, "_error"))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # `class Helper(Missing): ...` at a test file's top level must not stop the file's other tests;
        # the tests that use Helper use the missing name too, so they are not counted.
        return ()

    __call__ = _fail
    __iter__ = _fail
    __getitem__ = _fail


class InternalModuleProxy(types.ModuleType):
    """Stands for ``synalinks.src.M``: attributes resolve through synalinks' public API."""

    def __init__(self, name: str, api: PublicApi) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package, so submodules import
        self._api = api

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name != "__version__":
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if full in sys.modules:
            return sys.modules[full]
        candidates = self._api.public_paths(self.__name__, name)
        errors = []
        for candidate in candidates:
            try:
                return resolve_public(candidate)
            except AttributeError as error:
                errors.append(str(error))
        alias = INTERNAL_ALIASES.get(full)
        if alias is not None:
            return _resolve_promptgym(alias)
        if self._api.is_source_module(full):
            return importlib.import_module(full)
        if candidates:
            MISSING_NAMES.add(candidates[0])
            return MissingName(candidates[0], errors[0])
        # A private name the test file imports: only the tests that use it fail (and those are not counted).
        return MissingName(full, f"{full} is not part of synalinks' public API")


class SynalinksFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, api: PublicApi, harness_modules: dict[str, types.ModuleType]) -> None:
        self.api = api
        self.harness_modules = harness_modules

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "synalinks" and not fullname.startswith("synalinks."):
            return None
        if fullname.startswith("synalinks.src.") and fullname not in self.harness_modules:
            # only synalinks' real modules: `from synalinks.src.m import Missing` must fail, not become a module
            if not self.api.is_source_module(fullname):
                return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        name = spec.name
        if name in self.harness_modules:
            return self.harness_modules[name]
        if name in INTERNAL_MODULES:
            return importlib.import_module(INTERNAL_MODULES[name])
        if name == "synalinks.src" or name.startswith("synalinks.src."):
            return InternalModuleProxy(name, self.api)
        target = "promptgym" + name[len("synalinks"):]
        try:
            return importlib.import_module(target)
        except ModuleNotFoundError:
            raise ModuleNotFoundError(f"promptgym has no module {target} (for {name})", name=name) from None

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install(api: PublicApi, harness_modules: dict[str, types.ModuleType] | None = None) -> None:
    """Make ``import synalinks`` (and ``synalinks.src.*``) resolve to promptgym."""
    for name in [name for name in sys.modules if name == "synalinks" or name.startswith("synalinks.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, SynalinksFinder(api, harness_modules or {}))
