"""Programs: functional, sequential and subclassed."""

from promptgym.programs.program import Program
from promptgym.programs.sequential import Sequential

__all__ = ["Program", "Sequential"]
