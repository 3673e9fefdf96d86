"""Which model each Generator runs on, as candidate data: what lets weights be one more trainable lever.

A candidate that changes a Generator's model (``FineTune``'s) carries, next to
the variable values, ``{MODELS_KEY: {generator name: model string}}``. Inside
``variable_values(...)`` that entry makes those Generators call the named
model instead of their own, without touching the program, so a tuned model
is raced against the start like any prompt; ``assign_models`` makes the
choice permanent (``save()`` then stores the new model string)::

    with variable_values({MODELS_KEY: {"answer": "local/ft-sentiment-1a2b3c"}}):
        await program(x)           # the Generator "answer" runs on the tuned model
    assign_models(program, {"answer": "local/ft-sentiment-1a2b3c"})
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from promptgym.lm.language_model import LanguageModel
from promptgym.modules.variable import current_overrides

MODELS_KEY = "@language_models"
"""The candidate entry that names a model per Generator (not a variable: no variable name starts with ``@``)."""

ModelFactory = Callable[[Any, str], Any]


def language_model_like(base: Any, model: str) -> LanguageModel:
    """A LanguageModel for ``model`` with ``base``'s settings (temperature, max_tokens, cache, ...)."""
    config = dict(base.get_config()) if isinstance(base, LanguageModel) else {}
    config.pop("fallback", None)
    config.pop("api_base", None)  # a tuned model runs here, whatever server the base used
    known = {key: value for key, value in config.items() if key in LANGUAGE_MODEL_SETTINGS}
    return LanguageModel(**{**known, "model": model})


LANGUAGE_MODEL_SETTINGS = ("temperature", "max_tokens", "seed", "cache", "concurrency", "timeout", "retries",
                           "output_retries", "n_ctx", "cache_dir")

_factory: list[ModelFactory] = [language_model_like]
_built: dict[tuple[int, str], Any] = {}


def set_model_factory(factory: ModelFactory | None) -> ModelFactory:
    """Replace how a model string becomes a LanguageModel (tests run a tuned model as a scripted one); returns the old."""
    previous = _factory[0]
    _factory[0] = factory or language_model_like
    _built.clear()
    return previous


def model_for(base: Any, model: str) -> Any:
    """The LanguageModel for ``model`` in place of ``base`` (built once per pair, so its cache and lock are shared)."""
    if getattr(base, "model", None) == model:
        return base
    key = (id(base), model)
    if key not in _built:
        _built[key] = _factory[0](base, model)
    return _built[key]


def forget_model(model: str) -> None:
    """Drop the LanguageModels built for ``model`` (a retrained model with the same name is another model)."""
    for key in [key for key in _built if key[1] == model]:
        del _built[key]


def active_language_model(module: Any) -> Any:
    """``module.language_model``, or the model a running candidate names for it."""
    overrides = current_overrides()
    chosen = (overrides or {}).get(MODELS_KEY) or {}
    model = chosen.get(module.name) if isinstance(chosen, Mapping) else None
    return module.language_model if model is None else model_for(module.language_model, model)


def current_models(program: Any) -> dict[str, str]:
    """``{module name: model string}`` for every module of ``program`` that prompts a language model."""
    models = {}
    for module in getattr(program, "modules", []):
        if not callable(getattr(module, "messages", None)):
            continue
        model = getattr(getattr(module, "language_model", None), "model", None)
        if isinstance(model, str):
            models[module.name] = model
    return models


def assign_models(program: Any, models: Mapping[str, str]) -> None:
    """Point each named module of ``program`` at its model (a no-op for a module already on it)."""
    by_name = {module.name: module for module in program.modules}
    unknown = sorted(set(models) - set(by_name))
    if unknown:
        raise ValueError(f"a candidate names models for modules the program lacks: {', '.join(unknown)}")
    for name, model in models.items():
        module = by_name[name]
        if getattr(module.language_model, "model", None) != model:
            module.language_model = model_for(module.language_model, model)


def assign_variables(program: Any, variables: Mapping[str, Any], owner: str = "the candidate") -> None:
    """Give ``program`` a candidate's variable values, and its modules the models it names (:data:`MODELS_KEY`).

    ``owner`` names the candidate in the error when it has a variable the program lacks.
    """
    by_name = {variable.name: variable for variable in program.variables}
    unknown = sorted(set(variables) - set(by_name) - {MODELS_KEY})
    if unknown:
        raise ValueError(f"{owner} has variables the program lacks: {', '.join(unknown)}")
    for name, value in variables.items():
        if name == MODELS_KEY:
            assign_models(program, value)
        else:
            by_name[name].assign(value)
