"""``ChainOfThought``: a Generator that writes its reasoning before the answer."""

from __future__ import annotations

from typing import Any

from promptgym.core.data_model import DataModel
from promptgym.core.schema import with_leading_field
from promptgym.core.serialization import register_builtin
from promptgym.modules.generator import Generator

THINKING_DESCRIPTION = "Step-by-step reasoning that leads to the answer"


@register_builtin
class ChainOfThought(Generator):
    """Same arguments as :class:`Generator`; the output gains a leading ``thinking`` field.

    >>> # outputs = await ChainOfThought(data_model=Answer, language_model=lm)(inputs)
    >>> # (await program(x)).get("thinking")

    When the server returns the model's own reasoning (``reasoning_content``:
    vLLM, Ollama, DeepSeek), that reasoning fills ``thinking``. Without a
    data model it chats like a Generator, the reasoning in the message's
    ``reasoning_content``. ``reasoning_effort`` reads ``"low"`` unless given
    (synalinks' default); promptgym sends it only when you pass it, since a
    server that doesn't reason may refuse the field.
    """

    def __init__(self, *args: Any, reasoning_effort: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, reasoning_effort=reasoning_effort, **kwargs)
        self._sent_reasoning_effort = reasoning_effort
        self.reasoning_effort = reasoning_effort or "low"

    def _sampling(self) -> dict[str, Any]:
        sampling = super()._sampling()
        if self._sent_reasoning_effort is None:
            sampling.pop("reasoning_effort", None)
        return sampling

    def _output_model(self, data_model: type[DataModel]) -> type[DataModel]:
        self._answer_model = data_model
        return with_leading_field(data_model, "thinking", THINKING_DESCRIPTION)

    def _base_data_model(self) -> type[DataModel] | None:
        return getattr(self, "_answer_model", None)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        if self._sent_reasoning_effort is None:
            config.pop("reasoning_effort", None)
        return config
