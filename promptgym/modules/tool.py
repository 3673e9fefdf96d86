"""``Tool``: a Python function a language model may call, described by its signature and docstring.

    async def add(a: float, b: float) -> dict:
        \"\"\"Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        \"\"\"
        return {"sum": a + b}

    tool = Tool(add)
    tool.get_tool_schema()["properties"]["a"]     # {"type": "number", "description": "The first number.", ...}
    (await tool(a=1, b=2)).get_json()             # {"sum": 3}
    (await tool(a="x")).get_json()                # {"error": "invalid arguments for add: ..."}

The JSON schema of the arguments comes from the type hints and the
docstring's ``Args:`` section; a function without a docstring, a parameter
without a description or of a type JSON can't carry fails at construction,
naming the function and the parameter. A call never raises for what the
model did: wrong arguments, an exception in the function or a call past
``timeout`` seconds become ``{"error": ...}``, which the agent shows the
model. A tool saves as its function's registered name
(``@register_synalinks_serializable()``), never as code.

A plain ``def`` runs on a daemon thread of :mod:`promptgym.modules.tool_threads`:
past its timeout the call answers and the script can still exit; a hung
function holds one of a bounded number of threads until it returns. The
arguments a tool gets are its own: a parameter named ``training`` is the
function's, not the framework's flag. What a call returns reaches the model
as strict JSON: NaN and the infinities become the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"``, and a value that contains itself (or is
nested deeper than ``MAX_RESULT_DEPTH``) is a tool error.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import json
import logging
import math
import re
import types
import typing
from typing import Any, Callable

import docstring_parser
import jsonschema

from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import register_builtin, registered_name, resolve
from promptgym.modules.module import Module
from promptgym.modules import tool_threads
from promptgym.modules.symbolic import SymbolicDataModel

logger = logging.getLogger("promptgym")

DEFAULT_TOOL_TIMEOUT_S = 60.0
TOOL_NAME_RULE = "^[A-Za-z0-9_-]{1,64}$"
"""OpenAI's rule for function names (most OpenAI-compatible servers apply it too)."""
MAX_RESULT_DEPTH = 100
DEFAULT_MAX_RESULT_CHARS = 100_000
"""A result's JSON longer than this is an error the model sees (about 25k tokens: most of a context window)."""
_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_UNSET: Any = object()
_SCALARS = {int: "integer", float: "number", bool: "boolean", str: "string", type(None): "null"}


class ToolDefinitionError(ValueError):
    """A function that can't be a tool (no docstring, an undocumented or unsupported parameter)."""


class ToolResultError(ValueError):
    """A tool's result that has no JSON form (it contains itself, or is nested too deep)."""


def check_timeout(value: Any, tool: str) -> float | None:
    """``value`` when it is a number of seconds > 0 or None, else a ToolDefinitionError naming the tool."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise ToolDefinitionError(f"the tool {tool!r}: timeout must be a number of seconds > 0 or None, got {value!r}")
    return value


def check_max_result_chars(value: Any, tool: str) -> int | None:
    """``value`` when it is a positive int or None, else a ToolDefinitionError naming the tool."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ToolDefinitionError(f"the tool {tool!r}: max_result_chars must be a number of characters >= 1 or None, "
                                  f"got {value!r}")
    return value


def check_tool_name(name: Any, where: str) -> str:
    """``name`` when servers take it as a function name, else a ToolDefinitionError naming ``where`` and the rule.

    >>> check_tool_name("get_weather", "the tool")
    'get_weather'
    """
    if not isinstance(name, str) or not re.fullmatch(TOOL_NAME_RULE, name):
        raise ToolDefinitionError(f"{where}: the name {name!r} is not one model servers accept: a function name must "
                                  f"match {TOOL_NAME_RULE} (letters, digits, '_' and '-', 1 to 64 of them)")
    return name


def json_schema_of_type(hint: Any, where: str) -> dict[str, Any]:
    """The JSON schema of a type hint; ``where`` names the parameter in the error for an unsupported one.

    >>> json_schema_of_type(list[int], "f(x)")
    {'type': 'array', 'items': {'type': 'integer'}}
    """
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is Any:
        return {}
    if hint in (list, typing.List):
        return {"type": "array", "items": {}}
    if hint in (dict, typing.Dict):
        return {"type": "object", "additionalProperties": {}}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in args if arg is not type(None)]
        if len(members) == 1:
            return json_schema_of_type(members[0], where)  # Optional[T]: the model may leave it out
        return {"anyOf": [json_schema_of_type(arg, where) for arg in members]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, set, frozenset):
        return {"type": "array", "items": json_schema_of_type(args[0], where) if args else {}}
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": json_schema_of_type(args[0], where)}
    if origin is dict:
        return {"type": "object", "additionalProperties": json_schema_of_type(args[1], where) if args else {}}
    raise ToolDefinitionError(f"{where}: type {hint!r} has no JSON form; use str, int, float, bool, "
                              "list[...], dict[str, ...], Literal[...], an Enum or Optional[...] of those")


def json_schema_type(py_type: Any) -> str | dict[str, Any]:
    """synalinks' spelling: a scalar's JSON type name, a container's schema (a ValueError for a type with no
    JSON form).

    >>> json_schema_type(int), json_schema_type(list[str])
    ('integer', {'type': 'array', 'items': {'type': 'string'}})
    """
    schema = json_schema_of_type(py_type, repr(py_type))
    return schema["type"] if set(schema) == {"type"} else schema


def _is_awaitable_function(func: Callable[..., Any]) -> bool:
    target = func.func if isinstance(func, functools.partial) else func
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(getattr(target, "__call__", None))


@register_builtin
class Tool(Module):
    """Wrap a function (``async def`` or plain ``def``) so that a language model can call it.

    Args:
        func: the function; each parameter needs a type hint and a line in the docstring's ``Args:``.
        name: the name the model sees (default: the function's name).
        description: what the model reads about it (default: the docstring's first paragraph).
        timeout: seconds one call may take; past it the call answers ``{"error": ...}`` (None: no limit).
        max_result_chars: a result whose JSON is longer answers ``{"error": ...}`` instead (None: no limit).
        trainable: tools hold no trainable state (False).

    Calling it, ``await tool(**arguments)``, returns a :class:`JsonDataModel`: the
    function's dict, ``{"result": value}`` for any other value, or
    ``{"error": ...}`` when the arguments are wrong, the function raises or
    it runs past ``timeout``. ``tool.last_call_failed`` says which.
    """

    def __init__(self, func: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 timeout: float | None = DEFAULT_TOOL_TIMEOUT_S, trainable: bool = False,
                 max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS) -> None:
        if not callable(func):
            raise ToolDefinitionError(f"Tool needs a function, got {type(func).__name__}")
        self._func = func
        function_name = getattr(func, "__name__", type(func).__name__)
        doc = inspect.getdoc(func)
        if not doc:
            raise ToolDefinitionError(f"the tool function {function_name!r} has no docstring: the model needs one "
                                      "(a first line saying what it does, and an Args: section describing each parameter)")
        self._docstring = docstring_parser.parse(doc)
        self._signature = inspect.signature(func)
        try:
            hints = typing.get_type_hints(func)
        except Exception as error:  # noqa: BLE001 - a forward reference that does not resolve
            raise ToolDefinitionError(f"the tool function {function_name!r}: its type hints don't resolve ({error})") from None
        self._properties, self._required = self._parameters_schema(function_name, hints)
        self._return_hint = hints.get("return")
        self._is_async = _is_awaitable_function(func)
        self.timeout = check_timeout(timeout, function_name)
        self.max_result_chars = check_max_result_chars(max_result_chars, function_name)
        description = description or self._docstring.short_description or ""
        name = check_tool_name(name if name is not None else function_name, f"Tool({function_name})")
        super().__init__(name=name, description=description, trainable=trainable)
        self.last_call_failed = False
        self.calls = 0
        self.failed_calls = 0

    def _parameters_schema(self, function_name: str, hints: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        documented = {param.arg_name: param.description for param in self._docstring.params}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for parameter in self._signature.parameters.values():
            where = f"the tool function {function_name!r}, parameter {parameter.name!r}"
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise ToolDefinitionError(f"{where}: *args/**kwargs can't be described to a model; name each parameter")
            if parameter.name not in hints:
                raise ToolDefinitionError(f"{where} has no type hint (the model needs its type, e.g. `{parameter.name}: str`)")
            if not documented.get(parameter.name):
                raise ToolDefinitionError(f"{where} is not described in the docstring's Args: section "
                                          f"(add a line `{parameter.name}: what it is`)")
            schema = json_schema_of_type(hints[parameter.name], where)
            schema = {**schema, "description": " ".join(documented[parameter.name].split()),
                      "title": parameter.name.title().replace("_", " ")}
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
            elif _jsonable(parameter.default):
                schema["default"] = parameter.default
            properties[parameter.name] = schema
        return properties, required

    # -- schemas ---------------------------------------------------------------------------

    def get_tool_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (an object; defaulted parameters are not required)."""
        return {
            "additionalProperties": False,
            "description": self._docstring.short_description,
            "properties": dict(self._properties),
            "required": list(self._required),
            "title": self.name.title().replace("_", " "),
            "type": "object",
        }

    get_input_schema = get_tool_schema

    def get_output_schema(self) -> dict[str, Any]:
        """The schema of what a call returns: always an object (the function's dict, ``{"result"}`` or ``{"error"}``).

        A ``dict[str, T]`` return hint gives its values' schema, a TypedDict its fields (and ``error``);
        otherwise any object.
        """
        schema: dict[str, Any] = {"type": "object", "title": f"{self.name}_output", "additionalProperties": True}
        hint = getattr(self, "_return_hint", None)  # (an MCP tool has its server's schema, no hint)
        where = f"the return type of tool {self.name!r}"
        try:
            if typing.get_origin(hint) is dict and len(typing.get_args(hint)) == 2:
                schema["additionalProperties"] = json_schema_of_type(typing.get_args(hint)[1], where)
            elif typing.is_typeddict(hint):
                hints = typing.get_type_hints(hint)
                # no "required": a failed call answers {"error": ...} instead of the fields
                schema["properties"] = {**{name: json_schema_of_type(field, where) for name, field in hints.items()},
                                        "error": {"type": "string"}}
                schema["additionalProperties"] = False
        except ToolDefinitionError:
            pass  # a return type without a JSON form: any object (the tool's call still checks what comes back)
        return schema

    _build_output_schema = get_output_schema  # synalinks' name

    def openai_tool(self) -> dict[str, Any]:
        """This tool in the OpenAI ``tools`` list form."""
        parameters = {key: value for key, value in self.get_tool_schema().items() if key not in ("title", "description")}
        return {"type": "function", "function": {"name": self.name, "description": self.description or "",
                                                 "parameters": parameters}}

    # -- calling ---------------------------------------------------------------------------

    def argument_error(self, arguments: Any) -> str | None:
        """What is wrong with ``arguments`` for this tool, or None."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        try:
            jsonschema.validate(arguments, self.get_tool_schema())
        except jsonschema.ValidationError as error:
            where = "/".join(str(part) for part in error.absolute_path)
            return f"{where + ': ' if where else ''}{error.message}"
        except jsonschema.SchemaError:
            return None  # a schema jsonschema can't read (an MCP server's): the tool itself checks
        return None

    def _split_training(self, kwargs: dict[str, Any], training: Any) -> tuple[dict[str, Any], bool]:
        """The tool's arguments and the framework's flag: ``training`` is an argument when the tool takes one."""
        if "training" in self._properties:
            if training is not _UNSET:
                kwargs = {**kwargs, "training": training}
            return kwargs, False
        return kwargs, bool(training) if training is not _UNSET else False

    async def __call__(self, *args: Any, training: Any = _UNSET, **kwargs: Any) -> Any:
        if args and len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            kwargs = dict(args[0])
        elif args:
            kwargs = {**dict(zip(self._properties, args)), **kwargs}
        if any(isinstance(value, SymbolicDataModel) for value in kwargs.values()):
            return SymbolicDataModel(schema=self.get_output_schema(), name=self.name)
        arguments, flag = self._split_training(kwargs, training)
        return await self.invoke(arguments, training=flag)

    async def call(self, training: Any = _UNSET, **kwargs: Any) -> JsonDataModel:
        """synalinks' form, ``await tool.call(**arguments)``; ``training`` is the tool's when it has that parameter."""
        arguments, flag = self._split_training(kwargs, training)
        return await self.invoke(arguments, training=flag)

    async def invoke(self, arguments: dict[str, Any], training: bool = False) -> JsonDataModel:
        """Run the function on ``arguments`` (a dict: the tool's own namespace, whatever the names).

        Every failure is an ``{"error": ...}`` answer: wrong arguments, an exception, a call past
        ``timeout``, every tool thread held by hung calls, a result with no JSON form.
        """
        self.calls += 1
        problem = self.argument_error(arguments)
        if problem is not None:
            return self._failure(f"invalid arguments for {self.name}: {problem}")
        try:
            if self._is_async:
                result = await asyncio.wait_for(self._func(**arguments), self.timeout)
            else:
                result = await tool_threads.SLOTS.run(self._func, timeout=self.timeout, name=self.name, **arguments)
            if inspect.isawaitable(result):  # a plain def that returns a coroutine
                result = await asyncio.wait_for(result, self.timeout)
            json_value = strict_json(result if isinstance(result, dict) else {"result": result})
            size = len(json.dumps(json_value, ensure_ascii=False)) if self.max_result_chars is not None else 0
        except asyncio.TimeoutError:
            return self._failure(f"{self.name} did not answer within {self.timeout:g} s")
        except tool_threads.ToolThreadsExhausted as error:
            return self._failure(str(error))
        except ToolResultError as error:
            return self._failure(f"{self.name} returned {error}; return plain JSON data")
        except Exception as error:  # noqa: BLE001 - the model sees what went wrong and may try again
            return self._failure(f"{self.name} failed: {type(error).__name__}: {error}")
        if self.max_result_chars is not None and size > self.max_result_chars:
            return self._failure(f"{self.name} returned {size:,} characters of JSON, more than its max_result_chars "
                                 f"({self.max_result_chars:,}); ask for less (a narrower query, fewer items)")
        self.last_call_failed = False
        return JsonDataModel(json=json_value, schema=self.get_output_schema(), name=f"{self.name}_output")

    def _failure(self, message: str) -> JsonDataModel:
        self.last_call_failed = True
        self.failed_calls += 1
        logger.debug("tool call failed: %s", message)
        return JsonDataModel(json={"error": message}, schema=self.get_output_schema(), name=f"{self.name}_output")

    async def compute_output_spec(self, inputs: Any = None, training: bool = False) -> SymbolicDataModel:
        return SymbolicDataModel(schema=self.get_output_schema(), name=self.name)

    # -- serialization ---------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        """The function by its registered name (never code), and the settings."""
        return {"name": self.name, "description": self.description, "trainable": self.trainable,
                "timeout": self.timeout, "max_result_chars": self.max_result_chars,
                "func": {"function": registered_name(self._func)}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Tool":
        config = dict(config)
        func = config.pop("func")
        name = func.get("function") if isinstance(func, dict) else func
        if not isinstance(name, str):
            raise ValueError(f"a tool's 'func' must name a registered function, got {func!r}")
        return cls(resolve(name, expected="tool function"), **config)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_text(text: str) -> str:
    """``text`` with each lone surrogate (bytes decoded with ``surrogateescape``) as U+FFFD.

    No request to a model can carry a lone surrogate: UTF-8 has no form for it.

    >>> unicode_text(b"report-\\xff.txt".decode("utf-8", "surrogateescape"))
    'report-\ufffd.txt'
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def strict_json(value: Any, path: tuple[str, ...] = (), within: frozenset[int] = frozenset()) -> Any:
    """``value`` as strict JSON (what ``json.dumps(..., allow_nan=False)`` takes).

    Anything else becomes its text (a tool may return a date, a set...), a lone surrogate U+FFFD, NaN and the infinities
    the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; a value that contains itself or is
    nested deeper than ``MAX_RESULT_DEPTH`` raises :class:`ToolResultError` naming where.

    >>> strict_json({"x": float("nan"), "when": {1, 2}})
    {'x': 'NaN', 'when': [1, 2]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE.get(value, "NaN")
    if isinstance(value, str):
        return unicode_text(value)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    where = "/".join(path) or "the top"
    if id(value) in within:
        raise ToolResultError(f"a value that contains itself (at {where})")
    if len(path) >= MAX_RESULT_DEPTH:
        raise ToolResultError(f"a value nested deeper than {MAX_RESULT_DEPTH} levels (at {where[:200]}...)")
    inner = within | {id(value)}
    if isinstance(value, dict):
        return {unicode_text(str(key)): strict_json(item, (*path, str(key)), inner) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [strict_json(item, (*path, str(index)), inner) for index, item in enumerate(value)]
    if hasattr(value, "model_dump"):
        return strict_json(value.model_dump(mode="json"), path, inner)
    return str(value)
