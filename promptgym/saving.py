"""``promptgym.saving``: registering custom objects for save/load.

    @promptgym.saving.register_synalinks_serializable()
    async def my_reward(y_true, y_pred): ...
"""

from promptgym.core.serialization import (
    CustomObjectScope,
    custom_object_scope,
    deserialize_object,
    get_custom_objects,
    get_registered_name,
    get_registered_object,
    register_promptgym_serializable,
    register_synalinks_serializable,
    serialize_object,
)
from promptgym.programs.saving import load_program, program_from_json, program_to_json, save_program

serialize_synalinks_object = serialize_object
"""synalinks' name: ``{"class_name", "config"}`` of an object (variables not included: see ``program_to_json``)."""
deserialize_synalinks_object = deserialize_object
"""synalinks' name: rebuild from :func:`serialize_synalinks_object` (only registered classes)."""

__all__ = [
    "CustomObjectScope", "custom_object_scope", "get_custom_objects", "get_registered_name", "get_registered_object",
    "deserialize_object", "deserialize_synalinks_object", "load_program", "program_from_json", "program_to_json",
    "register_promptgym_serializable", "register_synalinks_serializable", "save_program", "serialize_object",
    "serialize_synalinks_object",
]
