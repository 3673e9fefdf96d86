"""Programs: functional, sequential and subclassed; and ProgramAsJudge, the reward graded by a program."""

from promptgym.programs.judge import ProgramAsJudge
from promptgym.programs.program import Program, Sequential

__all__ = ["Program", "ProgramAsJudge", "Sequential"]
