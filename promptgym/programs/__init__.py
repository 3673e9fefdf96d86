"""Programs: functional, sequential and subclassed."""

from promptgym.programs.program import Program, Sequential

__all__ = ["Program", "Sequential"]
