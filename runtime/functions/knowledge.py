"""The ``knowledge_base`` System Tool's functions (models:
``siesta_contract.functions.knowledge``). Descriptions quote the peer platform's
reference (seeds/004_*, "Knowledge Base Tools")."""

from __future__ import annotations

from siesta_contract.functions.knowledge import (
    FileSearchArgs,
    FileSearchResult,
    ListKnowledgeBasesArgs,
    ListKnowledgeBasesResult,
    SearchKnowledgeBaseArgs,
    SearchKnowledgeBaseResult,
)

from runtime.functions.base import FunctionSpec

SEARCH_KNOWLEDGE_BASE = FunctionSpec(
    "search_knowledge_base",
    "Search a knowledge base using semantic similarity. Each result includes the "
    "source_connection_content_version_id, source name, content title, matched text, and "
    "similarity score; follow up with the content tools (load_content, peek_content, "
    "grep_content: the id as their file) for deeper inspection.",
    SearchKnowledgeBaseArgs,
    SearchKnowledgeBaseResult,
)
LIST_KNOWLEDGE_BASES = FunctionSpec(
    "list_knowledge_bases",
    "List all knowledge bases available in the current account. Returns the ID, name, "
    "and description of each knowledge base.",
    ListKnowledgeBasesArgs,
    ListKnowledgeBasesResult,
)
KNOWLEDGE = [SEARCH_KNOWLEDGE_BASE, LIST_KNOWLEDGE_BASES]
"""In the reference's order."""
FILE_SEARCH = FunctionSpec(
    "file_search",
    "Search the agent's uploaded files by meaning; returns the best matching passages "
    "with the file they come from.",
    FileSearchArgs,
    FileSearchResult,
)
"""Not a System Tool's: the agent's files decide it (``AgentConfig.files``, seed 003)."""
