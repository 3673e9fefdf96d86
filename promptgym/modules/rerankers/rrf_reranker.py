"""``RRFReranker``: several ranked result lists fused into one by Reciprocal Rank Fusion.

    fused = await RRFReranker(k=10, id_key="id")([vector_hits, keyword_hits])
    # {"result": [{row..., "rrf_score": 0.0325}, ...]}

A row's fused score is ``sum over the lists of 1 / (k_rank + rank)`` (rank
from 1). Only the order of each list counts, so results whose scores do not
compare (distances, BM25, regex matches) merge without rescaling.
"""

from __future__ import annotations

import json
from typing import Any

from promptgym.core.base_models import GenericResult
from promptgym.core.json_data_model import JsonDataModel
from promptgym.core.serialization import register_builtin
from promptgym.modules.module import Module
from promptgym.modules.symbolic import SymbolicDataModel


def _positive(name: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer{' or None' if optional else ''}, got {value!r}")


@register_builtin
class RRFReranker(Module):
    """Merge ranked ``result`` lists (``GenericResult``s) by Reciprocal Rank Fusion, best first.

    Args:
        k_rank: RRF's constant (default 60): lower weighs the top ranks more.
        k: how many fused rows at most (None: all).
        id_key: the field that says two rows are the same row; None: the whole row (its JSON) does.

    The same row in several lists comes back once, its fields merged (the later
    lists' values win) and its fused score in ``rrf_score``; rows of equal score
    keep the order they were first seen in. ``None`` inputs (an optional branch
    that found nothing) are skipped; with nothing to fuse the output is None.

    >>> import asyncio, promptgym as synalinks
    >>> def hits(*ids):
    ...     return synalinks.JsonDataModel(json={"result": [{"id": i} for i in ids]},
    ...                                    schema=synalinks.GenericResult.get_schema())
    >>> a, b = hits("x", "y"), hits("y")
    >>> fused = asyncio.run(synalinks.RRFReranker(id_key="id")([a, b])).get("result")
    >>> [(row["id"], round(row["rrf_score"], 4)) for row in fused]
    [('y', 0.0325), ('x', 0.0164)]
    """

    def __init__(self, *, k_rank: int = 60, k: int | None = None, id_key: str | None = None,
                 name: str | None = None, description: str | None = None, trainable: bool = False) -> None:
        super().__init__(name=name, description=description, trainable=trainable)
        _positive("k_rank", k_rank)
        _positive("k", k, optional=True)
        self.k_rank = k_rank
        self.k = k
        self.id_key = id_key

    def row_key(self, row: Any) -> Any:
        """What identifies ``row`` across the lists."""
        if self.id_key is not None and isinstance(row, dict) and self.id_key in row:
            return row[self.id_key]
        return json.dumps(row, sort_keys=True, default=str)

    def fuse(self, rankings: list[list[Any]]) -> list[Any]:
        """The rows of all ``rankings``, each once, by descending fused score (``rrf_score`` on dict rows)."""
        scores: dict[Any, float] = {}
        rows: dict[Any, Any] = {}
        for ranking in rankings:
            for rank, row in enumerate(ranking, start=1):
                key = self.row_key(row)
                scores[key] = scores.get(key, 0.0) + 1.0 / (self.k_rank + rank)
                if key not in rows:
                    rows[key] = dict(row) if isinstance(row, dict) else row
                elif isinstance(row, dict) and isinstance(rows[key], dict):
                    rows[key].update(row)
        for key, row in rows.items():
            if isinstance(row, dict):
                row["rrf_score"] = scores[key]
        order = sorted(scores, key=scores.__getitem__, reverse=True)  # stable: ties keep first-seen order
        return [rows[key] for key in order[: self.k]]

    async def call(self, inputs: Any, training: bool = False) -> Any:
        if not inputs:
            return None
        results = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        rankings = [rows for result in results if result is not None and (rows := result.get("result"))]
        if not rankings:
            return None
        return JsonDataModel(json={"result": self.fuse(rankings)}, schema=GenericResult.get_schema(), name=self.name)

    async def compute_output_spec(self, inputs: Any, training: bool = False) -> Any:
        return SymbolicDataModel(schema=GenericResult.get_schema(), name=self.name)

    def get_config(self) -> dict[str, Any]:
        return {"k_rank": self.k_rank, "k": self.k, "id_key": self.id_key, **super().get_config()}
