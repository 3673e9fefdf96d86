"""``ChainOfThought``: a Generator that writes its reasoning before the answer."""

from __future__ import annotations

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
    """

    def _output_model(self, data_model: type[DataModel]) -> type[DataModel]:
        self._answer_model = data_model
        return with_leading_field(data_model, "thinking", THINKING_DESCRIPTION)

    def _base_data_model(self) -> type[DataModel]:
        return self._answer_model
