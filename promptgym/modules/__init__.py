"""Modules: the steps of a program."""

from typing import Any

from promptgym.core.serialization import deserialize_in_scope, serialize_object
from promptgym.modules.action import Action
from promptgym.modules.branch import Branch
from promptgym.modules.chain_of_thought import ChainOfThought
from promptgym.modules.decision import Decision, MultiDecision
from promptgym.modules.function_calling_agent import FunctionCallingAgent
from promptgym.modules.generator import Generator
from promptgym.modules.input_module import InputModule
from promptgym.modules.knowledge import EmbedKnowledge, RetrieveKnowledge, StampKnowledge, Text2SQL, UpdateKnowledge
from promptgym.modules.json_operation import MergeOperation, UnaryOperation
from promptgym.modules.lambda_module import Lambda
from promptgym.modules.masking import InMask, OutMask
from promptgym.modules.merging import And, Concat, Concatenate, Or, Xor
from promptgym.modules.module import Module
from promptgym.modules.operator_modules import operation_module  # noqa: F401 - also registers the operators
from promptgym.modules.rerankers import RRFReranker
from promptgym.modules.reshaping import Factorize, Identity, Not, Prefix, Suffix
from promptgym.modules.retrievers import FullTextSearch, HybridFTSSearch, HybridRegexSearch, RegexSearch, SimilaritySearch
from promptgym.modules.self_critique import SelfCritique
from promptgym.modules.symbolic import Input, SymbolicDataModel
from promptgym.modules.tool import Tool
from promptgym.modules.variable import Variable

__all__ = ["Action", "And", "Branch", "ChainOfThought", "Decision", "MultiDecision", "SelfCritique", "Concat", "EmbedKnowledge", "RetrieveKnowledge", "StampKnowledge", "Text2SQL", "UpdateKnowledge", "FullTextSearch", "HybridFTSSearch", "HybridRegexSearch", "RegexSearch",
           "RRFReranker", "SimilaritySearch", "Concatenate", "Factorize", "FunctionCallingAgent", "Generator", "Identity", "InMask", "Input",
           "InputModule", "Lambda", "MergeOperation", "Module", "Not", "Or", "OutMask", "Prefix", "Suffix",
           "SymbolicDataModel", "Tool", "UnaryOperation", "Variable", "Xor", "deserialize", "serialize"]


def serialize(module: Module) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` of a module (its models and data models included).

    >>> import promptgym
    >>> serialize(promptgym.Identity())["class_name"]
    'Identity'
    """
    return serialize_object(module)


def deserialize(config: dict[str, Any], custom_objects: dict[str, Any] | None = None) -> Any:
    """Rebuild a module from :func:`serialize`'s dict (registered classes, or ``custom_objects``)."""
    return deserialize_in_scope(config, custom_objects, expected="module")
