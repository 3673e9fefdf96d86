"""``promptgym.saving``: registering custom objects for save/load.

    @promptgym.saving.register_synalinks_serializable()
    async def my_reward(y_true, y_pred): ...
"""

from promptgym.core.serialization import (
    deserialize_object,
    register_promptgym_serializable,
    register_synalinks_serializable,
    serialize_object,
)
from promptgym.programs.saving import load_program, save_program

__all__ = [
    "deserialize_object", "load_program", "register_promptgym_serializable", "register_synalinks_serializable",
    "save_program", "serialize_object",
]
