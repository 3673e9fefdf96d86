"""The registry of serializable objects.

Loading a program never executes code: a saved file names classes and
functions, and only names found in this registry are resolved. Register your
own with the decorator (the name is the one the documents use)::

    @register_synalinks_serializable()
    async def my_reward(y_true, y_pred):
        return float(y_true.get("answer") == y_pred.get("answer"))
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_REGISTRY: dict[str, Any] = {}

BUILTIN_MODULES = ("promptgym.rewards", "promptgym.metrics", "promptgym.optimizers", "promptgym.callbacks",
                   "promptgym.taskapp.program", "promptgym.knowledge_bases")
"""Where the built-in serializable classes live: imported on the first name the registry doesn't know,
so a file loads in a fresh process without the user importing them first."""
_builtins_loaded = False


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for module in BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:  # an optional extra (the task app's FastAPI) may be missing; its names stay unknown
            continue


def registered_name(obj: Any) -> str:
    """The key an object is (or would be) registered under."""
    return getattr(obj, "_promptgym_registered_name", None) or f"{obj.__module__}>{obj.__qualname__}"


def register_synalinks_serializable(package: str | None = None, name: str | None = None) -> Callable[[T], T]:
    """Register a class or function so that saved programs can refer to it.

    The key is ``"package>name"`` (``package`` defaults to ``"Custom"``,
    ``name`` to the object's own name). Re-registering the same key replaces
    the entry, which keeps notebooks and test reloads working.
    """

    def decorator(obj: T) -> T:
        key = f"{package or 'Custom'}>{name or obj.__name__}"  # type: ignore[attr-defined]
        _REGISTRY[key] = obj
        _REGISTRY.setdefault(obj.__name__, obj)  # type: ignore[attr-defined]
        try:
            obj._promptgym_registered_name = key  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass
        return obj

    return decorator


register_promptgym_serializable = register_synalinks_serializable


def register_builtin(obj: T) -> T:
    """Register a promptgym class under its bare name (``"ExactMatch"``)."""
    _REGISTRY[obj.__name__] = obj  # type: ignore[attr-defined]
    obj._promptgym_registered_name = obj.__name__  # type: ignore[attr-defined]
    return obj


def resolve(name: str, *, expected: str = "object") -> Any:
    """The registered object called ``name``, or a clear error listing the choices."""
    if name not in _REGISTRY:
        _load_builtins()
    if name in _REGISTRY:
        return _REGISTRY[name]
    known = ", ".join(sorted(key for key in _REGISTRY if ">" not in key)) or "none"
    raise ValueError(
        f"unknown {expected} {name!r}: it is not registered. Register it with "
        f"@register_synalinks_serializable() before loading. Registered names: {known}"
    )


def serialize_object(obj: Any) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` of an object with ``get_config()``, or a registered function."""
    if callable(obj) and not hasattr(obj, "get_config"):
        return {"function": registered_name(obj)}
    return {"class_name": registered_name(type(obj)), "config": obj.get_config()}


def deserialize_object(data: dict[str, Any], *, expected: str = "object") -> Any:
    """Rebuild what :func:`serialize_object` wrote, resolving only registered names.

    An error raised while rebuilding carries the innermost ``data`` it failed in
    (``where_failed(error)``), so a loader can name the key path in the file.
    """
    try:
        if not isinstance(data, dict):
            raise ValueError(f"expected an object with \"class_name\" and \"config\", got {type(data).__name__}")
        if "function" in data:
            return resolve(data["function"], expected=f"{expected} function")
        if not isinstance(data.get("class_name"), str):
            raise ValueError(f"expected \"class_name\": the name of a registered {expected}")
        cls = resolve(data["class_name"], expected=expected)
        config = data.get("config", {})
        if not isinstance(config, dict):
            raise ValueError(f"\"config\" must be an object, got {type(config).__name__}")
    except Exception as error:
        _mark(error, data)
        raise
    try:
        return cls.from_config(config)
    except Exception as error:
        _mark(error, config)  # the class's own config is what it choked on
        raise


def with_objects(config: dict[str, Any], **expected: str) -> dict[str, Any]:
    """A copy of ``config`` in which each key named in ``expected`` that holds a
    serialized object (a dict, as :func:`serialize_object` wrote it) is rebuilt.

    The shared half of a ``from_config`` whose arguments include objects: keys
    that are absent, ``None`` or already objects are left as they are.

    >>> with_objects({"k": 2, "reward": None}, reward="reward")
    {'k': 2, 'reward': None}
    """
    config = dict(config)
    for key, kind in expected.items():
        if isinstance(config.get(key), dict):
            config[key] = deserialize_object(config[key], expected=kind)
    return config


def _mark(error: Exception, where: Any) -> None:
    if not hasattr(error, _WHERE):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(error, _WHERE, where)


_WHERE = "_promptgym_failed_in"


def where_failed(error: BaseException) -> Any:
    """The innermost serialized object :func:`deserialize_object` was rebuilding when ``error`` was raised."""
    return getattr(error, _WHERE, None)


def json_path(root: Any, target: Any) -> str | None:
    """The path of ``target`` (found by identity) inside ``root``: ``program.config.modules[0]``.

    >>> doc = {"a": [{"b": 1}, {"c": 2}]}
    >>> json_path(doc, doc["a"][1])
    'a[1]'
    """
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        value, path = stack.pop()
        if value is target:
            return path
        if isinstance(value, dict):
            stack.extend((item, f"{path}.{key}" if path else str(key)) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{index}]") for index, item in enumerate(value))
    return None


def get_registered_name(obj: Any) -> str:
    """The name ``obj`` (a class or function) is saved under."""
    return registered_name(obj)


def get_registered_object(name: str, custom_objects: dict[str, Any] | None = None,
                          module_objects: dict[str, Any] | None = None) -> Any:
    """The object registered (or given in ``custom_objects``/``module_objects``) as ``name``, else None."""
    for table in (custom_objects, module_objects):
        if table and name in table:
            return table[name]
    if name not in _REGISTRY:
        _load_builtins()
    return _REGISTRY.get(name)


def get_custom_objects() -> dict[str, Any]:
    """Your registered objects (``register_synalinks_serializable``), by their ``"package>name"`` keys."""
    return {key: value for key, value in _REGISTRY.items() if ">" in key}


class CustomObjectScope:
    """Inside ``with custom_object_scope({"MyReward": MyReward}):`` those names load too; they are forgotten after.

    A name registered before the scope keeps its object once the scope ends.
    """

    def __init__(self, *custom_objects: dict[str, Any]) -> None:
        self.custom_objects = {key: value for table in custom_objects for key, value in (table or {}).items()}
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> "CustomObjectScope":
        _MISSING_ENTRY = object()
        self._saved = {key: _REGISTRY.get(key, _MISSING_ENTRY) for key in self.custom_objects}
        self._missing = _MISSING_ENTRY
        _REGISTRY.update(self.custom_objects)
        return self

    def __exit__(self, *exc: Any) -> None:
        for key, previous in self._saved.items():
            if previous is self._missing:
                _REGISTRY.pop(key, None)
            else:
                _REGISTRY[key] = previous


custom_object_scope = CustomObjectScope


def by_identifier(identifier: Any, cls: type, kind: str) -> Any:
    """An instance of ``cls`` from an instance, a model string (``cls(model=...)``) or a serialized config dict."""
    if isinstance(identifier, cls):
        return identifier
    if isinstance(identifier, str):
        return cls(model=identifier)
    if isinstance(identifier, dict):
        return deserialize_object(identifier, expected=kind)
    raise TypeError(f"{a_or_an(kind)} {kind} is {a_or_an(cls.__name__)} {cls.__name__}, a model string or a config dict, "
                    f"got {identifier!r:.80}")


def deserialize_in_scope(config: dict[str, Any], custom_objects: dict[str, Any] | None = None, *,
                         expected: str = "object") -> Any:
    """:func:`deserialize_object` with ``custom_objects`` (name -> class) loadable for this call only.

    The body of every package's synalinks-style ``deserialize(config, custom_objects)``.
    """
    with custom_object_scope(custom_objects or {}):
        return deserialize_object(config, expected=expected)


def identifier_functions(cls: type[T], kind: str) -> tuple[Callable[[Any], T], Callable[[T], dict[str, Any]],
                                                           Callable[..., T]]:
    """``get``, ``serialize`` and ``deserialize`` of a package of ``cls`` models (synalinks' ``language_models``).

    >>> from promptgym.lm.language_model import LanguageModel
    >>> get, serialize, deserialize = identifier_functions(LanguageModel, "language model")
    >>> deserialize(serialize(get("ollama/qwen3"))).model
    'ollama/qwen3'
    """
    def get(identifier: Any) -> T:
        return by_identifier(identifier, cls, kind)

    def serialize(model: T) -> dict[str, Any]:
        return serialize_object(model)

    def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> T:
        return deserialize_in_scope(config, custom_objects, expected=kind)

    get.__doc__ = (f"{a_or_an(cls.__name__).capitalize()} {cls.__name__} from an instance, a model string or a "
                   '``{"class_name", "config"}`` dict.')
    serialize.__doc__ = f'``{{"class_name": ..., "config": ...}}`` of {a_or_an(kind)} {kind}.'
    deserialize.__doc__ = (f"Rebuild {a_or_an(kind)} {kind} from :func:`serialize`'s dict (registered classes, "
                           "or ``custom_objects``).")
    return get, serialize, deserialize


def a_or_an(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"
