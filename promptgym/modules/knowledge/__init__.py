"""Modules that read and write a knowledge base: EmbedKnowledge, UpdateKnowledge, RetrieveKnowledge, StampKnowledge, Text2SQL.

They hold the knowledge base as an object (anything with synalinks' KnowledgeBase
methods) and never import ``promptgym.knowledge_bases``, which sits above this
layer; a saved program names the KnowledgeBase class through the registry.
"""

from promptgym.modules.knowledge.embed_knowledge import EmbedKnowledge
from promptgym.modules.knowledge.retrieve_knowledge import RetrieveKnowledge, default_retriever_instructions
from promptgym.modules.knowledge.stamp_knowledge import StampKnowledge
from promptgym.modules.knowledge.text2sql import Text2SQL, default_text2sql_instructions
from promptgym.modules.knowledge.update_knowledge import UpdateKnowledge

__all__ = ["EmbedKnowledge", "RetrieveKnowledge", "StampKnowledge", "Text2SQL", "UpdateKnowledge",
           "default_retriever_instructions", "default_text2sql_instructions"]
