"""Modules: the steps of a program."""

from promptgym.modules.chain_of_thought import ChainOfThought
from promptgym.modules.generator import Generator
from promptgym.modules.module import Module
from promptgym.modules.symbolic import Input, SymbolicDataModel
from promptgym.modules.variable import Variable

__all__ = ["ChainOfThought", "Generator", "Input", "Module", "SymbolicDataModel", "Variable"]
