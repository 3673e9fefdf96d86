"""``Module``: the base of Generator, ChainOfThought, the merging modules and user modules.

Calling a module on symbolic data models adds a step to the program being
built and returns the symbolic outputs; calling it on values runs it. A
subclass implements ``async def call(self, inputs, training=False)`` (the
``training`` argument is optional) and says what it outputs in one of three
ways, tried in this order:

1. ``compute_output_spec(inputs)`` returning symbolic data models;
2. ``output_data_model(input_data_model)`` returning a DataModel class
   (one input);
3. nothing: ``call`` is traced on the symbolic inputs (a module made of
   other modules needs no more).

A module whose every input is None outputs None without running (that is
how a branch that was not taken switches off what follows it); merging
modules, which read None, set ``accepts_none = True``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from promptgym.core.base_models import is_trainable
from promptgym.core.call_scope import enter_module_call, exit_module_call
from promptgym.core.data_model import DataModel
from promptgym.core.spans import current_tracer
from promptgym.core.tree import flatten, map_structure
from promptgym.lm.usage import PHASES, current_phase, usage_scope
from promptgym.modules.naming import reset_names, snake_case, unique_name  # noqa: F401 - importable from here too
from promptgym.modules.symbolic import CallNode, SymbolicDataModel, any_symbolic
from promptgym.modules.variable import Variable, initial_value

logger = logging.getLogger(__name__)


def run_sync(coroutine: Any) -> Any:
    """Drive a coroutine that never really suspends (building a graph) to its result, without a loop."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("building this program step awaited something asynchronous; build it inside `async` code "
                       "with `await module(inputs)`")


@dataclass
class CallContext:
    """What one call of a module knows about itself (kept per asyncio task)."""

    call_id: int
    parent_call_id: int | None
    training: bool


_call_ids = itertools.count(1)
_current_call: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("promptgym_call", default=None)


def _signature_accepts(function: Any, name: str) -> bool:
    """Whether ``function`` takes a ``name`` argument (a bound method is looked up by its function, once)."""
    return _accepts(getattr(function, "__func__", function), name)


@functools.lru_cache(maxsize=4096)
def _accepts(function: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return True
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _as_symbolic(value: Any) -> Any:
    """A value as a free symbolic data model of its schema (building a module from a concrete call)."""
    if value is None or isinstance(value, SymbolicDataModel):
        return value
    return SymbolicDataModel(schema=value.get_schema())


class Module:
    """A step of a program; see the module docstring."""

    accepts_none = False
    """Run even when every input is None (merging modules); others output None then."""
    span_kind = "module"
    """What a tracing span calls this call (``promptgym.tracing``); programs say "program"."""

    def __init__(self, name: str | None = None, description: str | None = None, trainable: bool = True) -> None:
        object.__setattr__(self, "_tracked", {})
        self._auto_named = name is None
        self.name = name or unique_name(snake_case(type(self).__name__))
        self.description = description
        self.trainable = trainable
        self._variables: list[Variable] = []
        self.built = False
        self.call_count = 0          # calls on values, and the seconds they took (operational metrics read them)
        self.call_seconds = 0.0
        self._phase_calls: dict[str, list[float]] = {}  # the same by phase: [calls, seconds]

    def __setattr__(self, name: str, value: Any) -> None:
        tracked = self.__dict__.get("_tracked")
        if tracked is not None and not name.startswith("_"):
            children = [value] if isinstance(value, Module) else \
                [item for item in value if isinstance(item, Module)] if isinstance(value, (list, tuple)) else []
            if children:
                tracked[name] = children
            else:
                tracked.pop(name, None)
        object.__setattr__(self, name, value)

    # -- sub-modules and variables ----------------------------------------------------------

    @property
    def submodules(self) -> list["Module"]:
        """The modules held in this module's attributes, in assignment order."""
        found: dict[int, Module] = {}
        for children in self.__dict__.get("_tracked", {}).values():
            for child in children:
                found.setdefault(id(child), child)
        return list(found.values())

    def _variable_holders(self) -> list["Module"]:
        """The modules whose variables are this one's too: its submodules (a program: its modules)."""
        return self.submodules

    def _flatten_modules(self, include_self: bool = True, recursive: bool = True) -> list["Module"]:
        """This module (``include_self``) and the modules under it, each once, depth first (synalinks' name)."""
        found: list[Module] = [self] if include_self else []
        seen = {id(self)}

        def children(module: Any) -> list[Module]:
            nested = getattr(module, "modules", None)  # a program's modules
            return [*(nested if isinstance(nested, list) else []), *getattr(module, "submodules", [])]

        stack = children(self)[::-1]
        while stack:
            module = stack.pop()
            if id(module) in seen or not isinstance(module, Module):
                continue
            seen.add(id(module))
            found.append(module)
            if recursive:
                stack.extend(children(module)[::-1])
        return found

    def add_variable(self, name: Any = None, value: dict[str, Any] | None = None, description: str = "", *,
                     initializer: Any = None, data_model: Any = None, trainable: bool = True,
                     check: Callable[[dict[str, Any]], str | None] | None = None) -> Variable:
        """A new variable of this module.

        ``add_variable("state", {"instructions": ...})`` (promptgym), or
        synalinks' ``add_variable(initializer=..., data_model=..., trainable=..., name=...)``;
        with only ``data_model=``, the value is the DataModel's defaults. ``check(value)`` says what is
        wrong with a value (see :class:`Variable`).
        """
        if isinstance(name, dict) or (name is not None and not isinstance(name, str)):
            initializer, name = name, None
        if data_model is not None:
            trainable = trainable and is_trainable(data_model)  # only optimizer-shaped state is trainable
        if value is None:
            value = _initial_value(initializer, data_model)
        name = name or (snake_case(data_model.__name__) if data_model is not None else f"variable_{len(self._variables)}")
        variable = Variable(f"{self.name}/{name}", value, trainable=self.trainable and trainable,
                            description=description or "", data_model=data_model, check=check)
        self._variables.append(variable)
        return variable

    @property
    def variables(self) -> list[Variable]:
        """This module's own variables, then those of :meth:`_variable_holders`, each once."""
        found: dict[int, Variable] = {id(variable): variable for variable in self._variables}
        for module in self._variable_holders():
            for variable in module.variables:
                found.setdefault(id(variable), variable)
        return list(found.values())

    @property
    def trainable_variables(self) -> list[Variable]:
        return [variable for variable in self.variables if variable.trainable and self.trainable]

    @property
    def non_trainable_variables(self) -> list[Variable]:
        return [variable for variable in self.variables if not (variable.trainable and self.trainable)]

    @property
    def prompt_variable(self) -> Variable | None:
        """The variable holding this module's prompt (``{"instructions", "examples"}``), if it has one.

        Optimizers find what they may rewrite through it; a Generator returns its ``state``.
        """
        return None

    # -- what a call outputs ----------------------------------------------------------------

    def output_data_model(self, input_data_model: type[DataModel]) -> type[DataModel]:
        raise NotImplementedError(f"{type(self).__name__} must define output_data_model()")

    def _overrides(self, method: str) -> bool:
        return getattr(type(self), method) is not getattr(Module, method)

    async def _output_spec(self, inputs: Any, training: bool) -> Any:
        if self._overrides("compute_output_spec"):
            method = self.compute_output_spec
            spec = method(inputs, training=training) if _signature_accepts(method, "training") else method(inputs)
            return await _maybe_await(spec)
        if self._overrides("output_data_model") and isinstance(inputs, SymbolicDataModel):
            return SymbolicDataModel(data_model=self.output_data_model(inputs.data_model))
        return await self._run_call(inputs, training)  # trace call() on the symbolic inputs

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        """The symbolic outputs for symbolic ``inputs``; override when ``call`` can't be traced."""
        raise NotImplementedError

    def symbolic_call(self, inputs: Any) -> Any:
        """Add this module to the graph being built (synchronous form of ``await module(symbolic)``)."""
        return run_sync(self._symbolic_call(inputs, training=False))

    async def _symbolic_call(self, inputs: Any, training: bool) -> Any:
        if not self.built:
            await self._build(inputs)
        spec = await self._output_spec(inputs, training)
        if not any_symbolic(spec):
            raise TypeError(f"{self.name}: tracing call() on symbolic inputs returned {spec!r}, not symbolic data "
                            "models; define compute_output_spec(inputs) or output_data_model(input_data_model)")
        node = CallNode(self, inputs)
        node.outputs = map_structure(
            lambda out: SymbolicDataModel(data_model=out, name=out.name, node=node)
            if isinstance(out, SymbolicDataModel) else out, spec)
        return node.outputs

    # -- building -----------------------------------------------------------------------------

    async def build(self, inputs: Any) -> None:
        """Set up what depends on the inputs' schema; called once, on symbolic inputs.

        A subclass may override it (sync or ``async``). Awaited directly on a
        module that doesn't, it builds the module for ``inputs`` (a DataModel
        class or instance, or a symbolic data model) by tracing ``call`` on
        symbolic stand-ins, without calling a model:

            program = MyProgram(language_model=lm)
            await program.build(Query)
        """
        if self.built:
            return
        symbolic = map_structure(_as_symbolic, inputs)
        await self._build(symbolic)
        try:
            await self._output_spec(symbolic, training=False)  # builds the modules call() uses
        except Exception as error:  # noqa: BLE001 - a call() that only runs on values builds on its first call
            logger.warning("%s: build() could not trace call() on symbolic inputs (%s: %s); its modules build "
                           "on the first call", self.name, type(error).__name__, error)

    async def _build(self, inputs: Any) -> None:
        symbolic = map_structure(_as_symbolic, inputs)
        if self._overrides("build"):
            await _maybe_await(self.build(symbolic))
        self.built = True

    # -- calling ------------------------------------------------------------------------------

    async def __call__(self, *args: Any, training: bool = False, **kwargs: Any) -> Any:
        inputs = args[0] if len(args) == 1 else list(args) if args else kwargs.pop("inputs", None)
        if any_symbolic(inputs):
            return await self._symbolic_call(inputs, training)
        if not self.built:
            await self._build_from_values(inputs, training)
        if not self.accepts_none and all(leaf is None for leaf in flatten(inputs)):
            return None
        started = time.perf_counter()
        try:
            tracer = current_tracer()
            if tracer is None:
                return await self._run_call(inputs, training)
            return await self._traced_call(tracer, inputs, training)
        finally:
            elapsed = time.perf_counter() - started
            self.call_count += 1
            self.call_seconds += elapsed
            counts = self._phase_calls.setdefault(current_phase(), [0, 0.0])
            counts[0] += 1
            counts[1] += elapsed

    async def _traced_call(self, tracer: Any, inputs: Any, training: bool) -> Any:
        """The call inside a span carrying its LM calls, tokens and latency (``promptgym.tracing.enable_otel``)."""
        attributes = {"promptgym.kind": self.span_kind, "promptgym.name": self.name,
                      "promptgym.class": type(self).__name__, "promptgym.training": training}
        with usage_scope() as usage, tracer.start_as_current_span(f"{self.span_kind} {self.name}",
                                                                   attributes=attributes) as span:
            started = time.perf_counter()
            try:
                return await self._run_call(inputs, training)
            finally:
                span.set_attributes({"promptgym.lm_calls": usage.calls, "gen_ai.usage.input_tokens": usage.prompt_tokens,
                                     "gen_ai.usage.output_tokens": usage.completion_tokens,
                                     "promptgym.latency_ms": (time.perf_counter() - started) * 1000})

    async def _build_from_values(self, inputs: Any, training: bool) -> None:
        """First call on values: build (and trace) on symbolic stand-ins, so no model is called for it."""
        if any(leaf is None for leaf in flatten(inputs)):
            return
        symbolic = map_structure(_as_symbolic, inputs)
        await self._build(symbolic)
        if not (self._overrides("compute_output_spec") or self._overrides("output_data_model")):
            try:
                await self._run_call(symbolic, training)
            except Exception:  # noqa: BLE001 - a call() that only works on values is fine; it just isn't traced
                pass

    async def _run_call(self, inputs: Any, training: bool) -> Any:
        # no context manager here: this runs on every call of every module
        parent = _current_call.get()
        context = _current_call.set(CallContext(next(_call_ids), parent.call_id if parent else None, training))
        names = enter_module_call(self.name)
        try:
            call = self.call
            result = call(inputs, training=training) if _signature_accepts(call, "training") else call(inputs)
            return await result if inspect.isawaitable(result) else result
        finally:
            exit_module_call(names)
            _current_call.reset(context)

    def _get_call_context(self) -> CallContext | None:
        return _current_call.get()

    async def call(self, inputs: Any, training: bool = False) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define `async def call(self, inputs, training=False)`")

    # -- serialization ------------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Module":
        return cls(**config)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"


def _initial_value(initializer: Any, data_model: Any) -> dict[str, Any]:
    if initializer is None and data_model is None:
        return {}
    return initial_value(initializer, data_model)


class _PhaseInvocations:
    """``module.<phase>_cumulated_invocations`` / ``..._invocation_elapsed_s`` (synalinks' program counters)."""

    def __init__(self, phase: str, slot: int) -> None:
        self.phase, self.slot = phase, slot

    def __get__(self, owner: Any, cls: type | None = None) -> Any:
        if owner is None:
            return self
        return owner.__dict__.get("_phase_calls", {}).get(self.phase, [0, 0.0])[self.slot]

    def __set__(self, owner: Any, value: float) -> None:
        owner.__dict__.setdefault("_phase_calls", {}).setdefault(self.phase, [0, 0.0])[self.slot] = value


for _phase in PHASES:
    setattr(Module, f"{_phase}_cumulated_invocations", _PhaseInvocations(_phase, 0))
    setattr(Module, f"{_phase}_cumulated_invocation_elapsed_s", _PhaseInvocations(_phase, 1))
