"""Programs: functional, sequential and subclassed; and ProgramAsJudge, the reward graded by a program."""

from promptgym.programs.judge import ProgramAsJudge
from promptgym.programs.program import Functional, Program
from promptgym.programs.sequential import Sequential
from promptgym.programs.state import program_from_json

__all__ = ["Functional", "Program", "ProgramAsJudge", "Sequential", "program_from_json"]
