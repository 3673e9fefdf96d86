"""Before a run spends anything: can every model the job calls be reached, with the key it was given?

    await check_models(job)    # or a ConfigError naming the model, its URL and what is wrong

A server that is down, a host that doesn't resolve, a refused API key would otherwise make every
call of the run fail. Embedded and scripted models have nothing to check.
"""

from __future__ import annotations

from typing import Any, Iterator

from promptgym.cli.build import RunPlan
from promptgym.cli.config import ConfigError
from promptgym.lm.embedding_model import EmbeddingModel
from promptgym.lm.errors import LMError
from promptgym.lm.language_model import LanguageModel

MODEL_TYPES = (LanguageModel, EmbeddingModel)


def models_of(obj: Any) -> Iterator[Any]:
    """The models ``obj`` holds as attributes (one level down, lists included)."""
    for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, MODEL_TYPES):
                yield item


def job_models(job: RunPlan) -> list[Any]:
    """Every distinct model of the program's modules, the reward, the metrics and the optimizer."""
    owners = [*getattr(job.program, "modules", []), job.reward, *job.metrics, job.optimizer]
    found: dict[tuple[Any, ...], Any] = {}
    for owner in owners:
        for model in models_of(owner):
            found.setdefault((type(model), model.model, model.api_base, getattr(model, "api_key", None)), model)
    return list(found.values())


async def check_models(job: RunPlan) -> None:
    """Raise a ConfigError naming the first model that can't be used (its URL, and why)."""
    for model in job_models(job):
        try:
            await model.check()
        except LMError as error:
            raise ConfigError(f"{error} (the job can't start: fix the model's api_base or key, or start the server)") from None
