"""Which parts of synalinks promptgym sets out to cover, by source path under ``synalinks/src``.

promptgym is the training framework (DataModels, modules, programs, rewards,
metrics, optimizers, callbacks, JSON ops, plots) with tools, the
function-calling agent, MCP tools, and knowledge bases on DuckDB with their
modules, the single-table retrievers and the RRF reranker; it has no graph store (nor its retrievers), the other
agents (SQL, Cypher, RAG, RLM, Deep Agent), sandboxes, multimodal inputs, dataset downloaders,
MLflow hooks or Keras Tuner. Tests and doc blocks in those areas are counted
apart (``out of scope``, with the reason) and listed in docs/synalinks.md.
"""

from __future__ import annotations

IN = "in"
OUT = "out"

SCOPE: dict[str, tuple[str, str]] = {
    # measured: (IN, area reported)
    "backend": (IN, "data models"),
    "modules/core": (IN, "core modules"),
    "modules/module": (IN, "core modules"),
    "modules/ttc": (IN, "core modules"),
    "modules/merging": (IN, "multi-branch (merging, masking, ops)"),
    "modules/masking": (IN, "multi-branch (merging, masking, ops)"),
    "ops": (IN, "multi-branch (merging, masking, ops)"),
    "modules/language_models": (IN, "language/embedding models"),
    "modules/embedding_models": (IN, "language/embedding models"),
    "programs": (IN, "programs"),
    "saving": (IN, "programs"),
    "trainers": (IN, "training"),
    "optimizers": (IN, "optimizers"),
    "initializers": (IN, "optimizers"),
    "rewards": (IN, "rewards"),
    "metrics": (IN, "metrics"),
    "callbacks": (IN, "callbacks"),
    "version": (IN, "programs"),
    "utils/plot_history": (IN, "plots"),
    "utils/plot_metrics": (IN, "plots"),
    "utils/program_visualization": (IN, "plots"),
    "modules/agents/function_calling_agent": (IN, "agents and tools"),
    "modules/core/tool": (IN, "agents and tools"),
    "modules/core/action": (IN, "agents and tools"),
    "utils/mcp": (IN, "agents and tools"),
    # not measured: (OUT, why)
    "knowledge_bases": (IN, "knowledge bases"),
    "modules/knowledge": (IN, "knowledge bases"),
    # not measured: (OUT, why)
    "knowledge_bases/graph_database_adapters": (OUT, "graph stores (entities, relations, Cypher)"),
    "knowledge_bases/database_adapters/lancedb_adapter": (IN, "the LanceDB adapter (lancedb://, the lancedb extra)"),
    "modules/knowledge/text2cypher": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/retrievers": (IN, "retrievers and rerankers"),
    "modules/retrievers/entity": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/retrievers/relation": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/retrievers/path": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/retrievers/global_graph": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/retrievers/local_graph": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/retrievers/_path_helpers": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/rerankers": (IN, "retrievers and rerankers"),
    "backend/pydantic/knowledge": (OUT, "graph stores (entities, relations, Cypher)"),
    "modules/agents": (OUT, "other agents (SQL, Cypher, RAG, RLM, Deep Agent, skills utilities)"),
    "utils/tool_utils": (OUT, "synalinks' older utils.tool_utils.Tool"),
    "modules/synthesis": (OUT, "code synthesis and sandboxes"),
    "sandboxes": (OUT, "code synthesis and sandboxes"),
    "backend/pydantic/media": (OUT, "multimodal inputs"),
    "datasets": (OUT, "dataset loaders"),
    "hooks": (OUT, "observability hooks (MLflow)"),
    "callbacks/monitor": (OUT, "observability hooks (MLflow)"),
    "utils/keras_tuner_utils": (OUT, "Keras Tuner"),
    "tuners": (OUT, "Keras Tuner"),
    "utils": (OUT, "synalinks' internal utilities"),
    "tree": (OUT, "synalinks' internal utilities"),
}
"""Path prefix (under synalinks/src, no extension) -> in or out, and the area or the reason. The longest prefix wins."""


def source_path(module: str) -> str:
    """``synalinks.src.modules.core.tool`` -> ``modules/core/tool``."""
    return module.removeprefix("synalinks.src.").replace(".", "/")


def classify(path: str) -> tuple[str, str]:
    """``(IN, area)`` or ``(OUT, reason)`` for the code at ``path`` (``modules/agents/sql_agent_test``)."""
    matches = [prefix for prefix in SCOPE
               if path == prefix or path.startswith(prefix + "/") or path.startswith(prefix + "_")]
    if not matches:
        return (OUT, "not classified")
    return SCOPE[max(matches, key=len)]


def classify_names(names: list[str], by_public: dict) -> tuple[str, str] | None:
    """``(OUT, reason)`` if one of these public names comes from an area out of scope, else None."""
    for name in names:
        export = by_public.get(name)
        if export is None:
            continue
        kind, reason = classify(source_path(export.module))
        if kind != IN:
            return (kind, reason)
    return None
