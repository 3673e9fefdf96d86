"""``FineTune``: the weight optimizer, beside the prompt optimizers (docs/optimizers/finetune.md).

- :mod:`.optimizer`: the optimizer (rows from the program, the tuned model as a candidate);
- :mod:`.sft`: its bridge to the SFT engine of :mod:`promptgym.finetune`, imported when FineTune is built,
  so that ``import promptgym.optimizers`` loads neither the engine nor torch;
- :mod:`.errors`: ``FineTuneError``.

    >>> from promptgym.optimizers import FineTune
    >>> FineTune(source="labels", n_epochs=1).get_config()["n_epochs"]
    1
"""

from promptgym.optimizers.finetune.errors import FineTuneError
from promptgym.optimizers.finetune.optimizer import FineTune, check_sft_settings, distinct, step_conversation

__all__ = ["FineTune", "FineTuneError", "check_sft_settings", "distinct", "step_conversation"]
