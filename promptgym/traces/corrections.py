"""Checking a corrected output against the program's output schema before it is stored.

A correction becomes a training label (``datasets.from_traces``), so one that does not fit
the output DataModel would fail the run that learns from it, weeks later; it is refused when
it is given instead, with the field that is wrong.

    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    check_correction(schema, {"answer": "4"})      # {'answer': '4'}
    check_correction(schema, {"answer": 4})        # CorrectionError: answer: 4 is not of type 'string'
"""

from __future__ import annotations

from typing import Any

import jsonschema


class CorrectionError(ValueError):
    """A corrected output that does not fit the output schema; ``field`` is the dotted path of the first bad field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def check_correction(schema: dict[str, Any] | None, correction: Any) -> dict[str, Any]:
    """``correction`` if it is a JSON object valid under ``schema`` (None: any object); else :class:`CorrectionError`."""
    if not isinstance(correction, dict):
        raise CorrectionError(f"correction: expected a JSON object with the output's fields, got "
                              f"{type(correction).__name__}", "correction")
    if not schema:
        return correction
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(correction), key=lambda error: list(error.absolute_path))
    if errors:
        first = errors[0]
        path = ".".join(str(part) for part in first.absolute_path)
        if not path and first.validator == "required":  # a missing field: name it rather than the whole object
            path = _missing_field(first.message)
        raise CorrectionError(f"correction.{path}: {first.message}" if path else f"correction: {first.message}",
                              f"correction.{path}" if path else "correction")
    return correction


def _missing_field(message: str) -> str:
    # jsonschema's required-error message is "'answer' is a required property"
    return message.split("'")[1] if message.count("'") >= 2 else ""
