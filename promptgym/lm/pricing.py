"""What one model's calls cost: its price (looked up once), a call's dollars, and its hold on the open caps.

``LanguageModel`` and ``EmbeddingModel`` each keep one :class:`ModelPricing`; the table and the user's
overrides are in :mod:`promptgym.lm.prices`, the caps in :mod:`promptgym.lm.spend`::

    >>> from promptgym.lm.prices import Price
    >>> pricing = ModelPricing("openai/gpt-4o-mini", lambda override: override, Price(0.15, 0.60))
    >>> round(pricing.priced(1000, 200).cost_usd, 8)
    0.00027
"""

from __future__ import annotations

import json
from typing import Any, Callable

from promptgym.lm.engine import LMRequest
from promptgym.lm.prices import Price, warn_unknown_price
from promptgym.lm.spend import SpendCapReached, active_caps
from promptgym.lm.streaming import StreamMeter
from promptgym.lm.usage import Usage

STREAM_EXTENSION_TOKENS = 32
"""A capped stream that outgrows its reservation (a server writing past ``max_tokens``) asks for this many
more tokens' price at a time, keeping two chunks' worth ahead, so a cap stops it before a chunk crosses."""


class ModelPricing:
    """``model``'s price, from ``resolve(override)`` at first use (None: unknown, reported as such, never $0).

    ``hint`` says, in the error a cap gives for a model with no price, how to give it one.
    """

    def __init__(self, model: str, resolve: Callable[[Price | None], Price | None], override: Price | None = None,
                 hint: str = "price={'input_per_mtok': ..., 'output_per_mtok': ...}") -> None:
        self.model = model
        self.hint = hint
        self._resolve = resolve
        self._override = override
        self._price: Price | None = None
        self._resolved = False
        self._tokens_per_char = 1.0  # a prompt's tokens per character, the most seen (a cap's estimate; 1.0: bytes)
        self._learned = False

    @property
    def override(self) -> Price | None:
        """The price the user gave (None: the table's)."""
        return self._override

    @override.setter
    def override(self, value: Price | None) -> None:
        self._override, self._resolved = value, False  # looked up again at the next call

    @property
    def price(self) -> Price | None:
        if not self._resolved:
            self._price, self._resolved = self._resolve(self._override), True
        return self._price

    def fix(self, price: Price | None) -> None:
        """Use ``price`` from now on, without a lookup (None: the model has no price)."""
        self._price, self._resolved = price, True

    def priced(self, prompt_tokens: int, completion_tokens: int = 0, billed: float = 0.0) -> Usage:
        """A call's dollar fields: what the server billed, else the price; an unknown price is counted as such."""
        if billed:
            return Usage(cost_usd=billed)
        price = self.price
        if price is None:
            warn_unknown_price(self.model)
            return Usage(unpriced_calls=1)
        return Usage(cost_usd=price.usd(prompt_tokens, completion_tokens))

    async def reserve(self, estimate: Callable[[Price], float]) -> float:
        """Hold ``estimate(price)`` dollars on every open cap and return it (0 with no cap open).

        A cap that can't hold it raises :class:`SpendCapReached`, after the caps already held let go; so
        does a model with no price while a cap is open (its spend could not be capped).
        """
        caps = active_caps()
        if not caps:
            return 0.0
        price = self.price
        if price is None:
            warn_unknown_price(self.model)
            raise SpendCapReached(f"max_usd is set but {self.model} has no price: give it one ({self.hint}, or "
                                  "[prices] in the train config) so its spend can be capped", reason="unpriced")
        held = estimate(price)
        for index, cap in enumerate(caps):
            try:
                await cap.reserve(held, self.model)
            except SpendCapReached:
                for earlier in caps[:index]:
                    earlier.settle(held, 0.0)
                raise
        return held

    @staticmethod
    def settle(held: float, actual_usd: float) -> None:
        """Replace a reservation of ``held`` dollars by what the call cost, on every open cap."""
        for cap in active_caps():
            cap.settle(held, actual_usd)

    def estimate(self, price: Price, request: LMRequest) -> float:
        """An upper estimate of a chat call's price at ``price``: its prompt, and ``max_tokens`` of answer."""
        if price.free:
            return 0.0
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        chars += len(json.dumps(request.schema)) if request.schema else 0
        chars += len(json.dumps(request.tools)) if request.tools else 0
        prompt = chars * self._tokens_per_char * 1.1 + 16 * len(request.messages) + 16
        return price.usd(int(prompt) + 1, request.max_tokens)

    def learn_prompt_size(self, request: LMRequest, prompt_tokens: int) -> None:
        """Keep the most tokens per character a prompt of this model has had (the next estimates use it)."""
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        if chars and prompt_tokens:  # less the template allowance estimate() adds on its own
            ratio = max(0, prompt_tokens - 16 * len(request.messages) - 16) / chars
            self._tokens_per_char = max(0.0 if not self._learned else self._tokens_per_char, ratio)
            self._learned = True

    def extend_stream_hold(self, held: float, meter: StreamMeter) -> float:
        """Keep a stream's reservation two chunks ahead of what it has cost (see :data:`STREAM_EXTENSION_TOKENS`);
        raise :class:`SpendCapReached` when a cap can't give more (a server writing past ``max_tokens``)."""
        price = self.price
        if price is None:
            return held
        ahead = price.usd(meter.prompt_tokens, meter.completion_tokens + 2 * meter.largest_chunk)
        if ahead <= held:
            return held
        more = price.usd(0, STREAM_EXTENSION_TOKENS) + ahead - held
        grown: list[Any] = []
        for cap in active_caps():
            if not cap.try_extend(more):
                for done in grown:
                    done.release(more)
                raise SpendCapReached(f"max_usd ${cap.limit_usd:.6f}: a streamed answer of {self.model} reached "
                                      f"{meter.completion_tokens} tokens and the next chunks would cross the cap")
            grown.append(cap)
        return held + more
