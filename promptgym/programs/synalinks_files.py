"""Program files written by synalinks (``program.save("program.json")`` there).

promptgym does not rebuild a program from synalinks' file: its architecture
is synalinks' own object configs, and promptgym's format never runs or
imports code named in a file. What it does take from the file is what
training produced, the trained instructions and examples, for a program
rebuilt in Python with the same module names::

    program = build_the_same_program()                  # same Generators, same names
    program.load_variables("trained_by_synalinks.json")  # its instructions and examples

``Program.load`` on such a file says so instead of failing on a missing key.
"""

from __future__ import annotations

from typing import Any


def is_synalinks_file(data: Any) -> bool:
    """Whether ``data`` (a parsed JSON file) was written by synalinks' ``Program.save``/``to_json``."""
    return isinstance(data, dict) and "synalinks_version" in data


def synalinks_load_problem(data: dict[str, Any], source: str) -> str:
    return (f"{source}: a synalinks program file (synalinks {data.get('synalinks_version')}, "
            f"class_name {data.get('class_name')!r}); promptgym does not rebuild programs from synalinks' "
            "architecture configs. Build the program in Python with the same module names, then "
            f"program.load_variables({source!r}) takes its trained instructions and examples (docs/synalinks.md)")


def _state_of(entry: Any) -> dict[str, Any] | None:
    """The trainable state (``{"instructions", "examples", ...}``) in a module's entry of the state tree."""
    if not isinstance(entry, dict):
        return None
    if "examples" in entry or "instructions" in entry:
        return entry
    states = [value for value in entry.values() if isinstance(value, dict) and ("examples" in value or "instructions" in value)]
    return states[0] if len(states) == 1 else None


def variables_from_synalinks(program: Any, data: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """promptgym variable values from a synalinks file's ``variables.trainable_variables``, by module name.

    A Generator's ``instructions`` and ``examples`` (inputs and outputs of
    each; synalinks' rewards and prediction stores are left out) replace the
    program's; a variable whose module the file lacks is an error naming it.
    """
    tree = (data.get("variables") or {}).get("trainable_variables")
    if not isinstance(tree, dict):
        raise ValueError(f"{source}: variables.trainable_variables: expected an object in a synalinks program file")
    values: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for variable in program.variables:
        module = variable.name.split("/", 1)[0]
        value = variable.get_json()
        if not (variable.trainable and {"instructions", "examples"} & set(value)):
            values[variable.name] = value  # not trained state: keep the program's own
            continue
        state = _state_of(tree.get(module))
        if state is None:
            missing.append(module)
            continue
        if "instructions" in value and isinstance(state.get("instructions"), str):
            value["instructions"] = state["instructions"]
        if "examples" in value and isinstance(state.get("examples"), list):
            value["examples"] = [{"inputs": example["inputs"], "outputs": example["outputs"]}
                                 for example in state["examples"]
                                 if isinstance(example, dict) and isinstance(example.get("inputs"), dict)
                                 and isinstance(example.get("outputs"), dict)]
        values[variable.name] = value
    if missing:
        raise ValueError(f"{source}: variables.trainable_variables has no entry for module(s) {', '.join(missing)} "
                         f"(the file has: {', '.join(sorted(tree)) or 'none'}); give the modules the same names")
    return values
