"""``promptgym.saving``: registering custom objects for save/load.

    @promptgym.saving.register_synalinks_serializable()
    async def my_reward(y_true, y_pred): ...

``program_from_json`` reads a program from JSON text or a program file's dict (as ``promptgym.programs``'s);
``program_to_dict`` / ``program_from_dict`` are the program file's dict and back.
"""

from promptgym.core.deprecation import renamed_names
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
from promptgym.programs.saving import load_program, program_from_dict, program_to_dict, save_program
from promptgym.programs.state import program_from_json

serialize_synalinks_object = serialize_object
"""synalinks' name: ``{"class_name", "config"}`` of an object (variables not included: see ``program_to_dict``)."""
deserialize_synalinks_object = deserialize_object
"""synalinks' name: rebuild from :func:`serialize_synalinks_object` (only registered classes)."""

__all__ = [
    "CustomObjectScope", "custom_object_scope", "get_custom_objects", "get_registered_name", "get_registered_object",
    "deserialize_object", "deserialize_synalinks_object", "load_program", "program_from_dict", "program_from_json",
    "program_to_dict",
    "register_promptgym_serializable", "register_synalinks_serializable", "save_program", "serialize_object",
    "serialize_synalinks_object",
]


# program_to_json returned the file's dict, not JSON text (Program.to_json() gives the text).
__getattr__ = renamed_names(__name__, {"program_to_json": "program_to_dict"}, globals())
