"""Programs: functional, sequential and subclassed; and ProgramAsJudge, the reward graded by a program."""

from promptgym.programs.judge import ProgramAsJudge
from promptgym.programs.program import Program
from promptgym.programs.sequential import Sequential

__all__ = ["Program", "ProgramAsJudge", "Sequential"]
