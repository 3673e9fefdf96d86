"""What a model's tokens cost in dollars: the user's price, else the pinned ``genai-prices`` table.

A price is dollars per million tokens, in and out. :func:`resolve_price` finds
it for a model string: the user's ``price=`` first, $0 for the embedded
engine (it reports compute seconds instead), else ``genai-prices`` (data
shipped in its wheel, pinned in ``pyproject.toml``; never updated over the
network). A model it does not list has no price (``None``): its calls are
counted as *unpriced*, with one warning per model, never as a silent $0::

    price = Price(input_per_mtok=0.15, output_per_mtok=0.60)
    price.usd(prompt_tokens=1000, completion_tokens=100)   # 0.00021
"""

from __future__ import annotations

import logging
import math
import threading
import warnings
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from genai_prices import Usage as TableUsage
from genai_prices import calc_price
from genai_prices import __version__ as TABLE_VERSION

logger = logging.getLogger("promptgym")

TABLE_SOURCE = f"genai-prices {TABLE_VERSION}"
FREE_PROVIDERS = ("local", "scripted")  # the embedded engine (and fine-tuned local models), the test double
_PROBE_TOKENS = 1000  # priced at a small size, then scaled: a 1M-token probe would hit long-context tiers


class UnknownPriceWarning(UserWarning):
    """A model has no price in the table and none was given: its spend is reported as unknown."""


class PriceError(ValueError):
    """A ``price=`` that is not a price."""


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens: ``input_per_mtok`` (prompt), ``output_per_mtok`` (completion).

    ``cached_input_per_mtok`` is informational (servers that discount cached prompts); ``source`` says
    where the numbers come from (``"user"``, ``"genai-prices X.Y.Z"``, ``"local"``).

    >>> Price(1.0, 2.0).usd(500_000, 250_000)
    1.0
    """

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    source: str = "user"

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok"):
            value = getattr(self, name)
            if value is None and name == "cached_input_per_mtok":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PriceError(f"price: {name} must be a number of dollars per million tokens >= 0, got {value!r}")

    @property
    def free(self) -> bool:
        return self.input_per_mtok == 0 and self.output_per_mtok == 0

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What a call with these token counts costs."""
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1_000_000

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def of(cls, value: "Price | dict[str, Any]", where: str = "price") -> "Price":
        """A :class:`Price` from itself or a dict ``{"input_per_mtok": ..., "output_per_mtok": ...}``.

        >>> Price.of({"input_per_mtok": 0.15, "output_per_mtok": 0.6}).output_per_mtok
        0.6
        """
        if isinstance(value, Price):
            return value
        if not isinstance(value, dict):
            raise PriceError(f"{where}: expected a Price or a dict with input_per_mtok and output_per_mtok, "
                             f"got {type(value).__name__}")
        allowed = {"input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "source"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise PriceError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(sorted(allowed - {'source'}))})")
        missing = [key for key in ("input_per_mtok", "output_per_mtok") if key not in value]
        if missing:
            raise PriceError(f"{where}: missing {missing[0]!r} (dollars per million tokens)")
        return cls(**{"source": "user", **value})


FREE = Price(0.0, 0.0, source="local")


def _is_loopback(api_base: str | None) -> bool:
    host = urlsplit(api_base).hostname if api_base else None
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or bool(host and host.startswith("127."))


def table_price(model: str, api_base: str | None = None) -> Price | None:
    """The pinned table's price of ``model`` (the name after ``provider/``), or None when it lists none.

    A server on this machine (a loopback ``api_base``) bills nobody, so the
    table does not apply to it: give ``price=`` (``0`` for a free one).

    >>> table_price("gpt-4o-mini").input_per_mtok
    0.15
    """
    if _is_loopback(api_base):
        return None
    hosted = api_base and "api.openai.com" not in api_base
    try:
        if hosted:
            try:
                return _probe(model, provider_api_url=api_base)
            except LookupError:
                pass  # a gateway the table doesn't know: match the model name alone
        return _probe(model)
    except LookupError:
        return None


def _probe(model: str, **where: Any) -> Price:
    prompt = calc_price(TableUsage(input_tokens=_PROBE_TOKENS), model, **where)
    completion = calc_price(TableUsage(output_tokens=_PROBE_TOKENS), model, **where)
    cached = calc_price(TableUsage(input_tokens=_PROBE_TOKENS, cache_read_tokens=_PROBE_TOKENS), model, **where)
    scale = Decimal(1_000_000 // _PROBE_TOKENS)
    return Price(float(prompt.total_price * scale), float(completion.total_price * scale),
                 float(cached.total_price * scale), source=TABLE_SOURCE)


_user_prices: dict[str, Price] = {}


def set_prices(prices: dict[str, "Price | dict[str, Any]"] | None) -> None:
    """Prices by model string for every model built after (the train config's ``[prices]``); None clears them.

    A model's own ``price=`` wins over these, and these over the table::

        set_prices({"openai/my-finetune": {"input_per_mtok": 0.3, "output_per_mtok": 1.2}})
    """
    _user_prices.clear()
    for model, price in (prices or {}).items():
        _user_prices[model] = Price.of(price, where=f"prices.{model}")


def resolve_price(provider: str, name: str, api_base: str | None, override: "Price | dict[str, Any] | None"
                  ) -> Price | None:
    """A model's price: ``override``, then :func:`set_prices`' (by ``provider/name`` or ``name``), $0 for local
    engines, else the table; None when unknown."""
    if override is not None:
        return Price.of(override, where=f"{provider}/{name}: price")
    for key in (f"{provider}/{name}", name):
        if key in _user_prices:
            return _user_prices[key]
    if provider in FREE_PROVIDERS:
        return FREE
    return table_price(name, api_base)


def resolve_embedding_price(provider: str, name: str, api_base: str | None,
                            override: "Price | dict[str, Any] | None") -> Price | None:
    """An embedding model's price (input tokens only), in :func:`resolve_price`'s order; None when unknown.

    The table files embedding models under their provider only, so it is asked with the model string's
    provider (``openai`` for a bare name).

    >>> resolve_embedding_price("openai", "text-embedding-3-small", None, None).input_per_mtok
    0.02
    """
    if override is not None or provider in FREE_PROVIDERS or any(key in _user_prices
                                                                 for key in (f"{provider}/{name}", name)):
        return resolve_price(provider, name, api_base, override)
    if _is_loopback(api_base):
        return None
    for where in ({"provider_id": provider}, {}):
        try:
            prompt = calc_price(TableUsage(input_tokens=_PROBE_TOKENS), name, **where)
        except (LookupError, ValueError):  # a provider the table doesn't know, or the model under none
            continue
        return Price(float(prompt.total_price * Decimal(1_000_000 // _PROBE_TOKENS)), 0.0, source=TABLE_SOURCE)
    return None


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_unknown_price(model: str) -> None:
    """Warn once per model that its spend is unknown (and how to give a price)."""
    with _warned_lock:
        if model in _warned:
            return
        _warned.add(model)
    message = (f"{model}: no price in {TABLE_SOURCE} and none given; its spend is reported as unknown "
               f"(give LanguageModel(..., price={{'input_per_mtok': ..., 'output_per_mtok': ...}}), "
               "or [prices] in the train config)")
    warnings.warn(message, UnknownPriceWarning, stacklevel=3)
    logger.warning(message)
