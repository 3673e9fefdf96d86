"""Demonstrations retrieved per input: the ``k`` pool examples nearest to the current input.

A Generator whose prompt variable has a ``"retrieval"`` entry shows, after its
fixed ``examples``, the ``k`` examples of the pool whose inputs are nearest
(cosine) to the input it is answering. The entry is plain JSON, so the program
file keeps it and loading needs no embedding call for the pool::

    {"k": 3,
     "embedding_model": {"class_name": "EmbeddingModel", "config": {"model": "local/multilingual-e5-small", ...}},
     "pool": [{"inputs": {...}, "outputs": {...}}, ...],
     "vectors": {"dtype": "float16", "shape": [300, 384], "data": "<base64>"}}

The choice is deterministic for a given input (ties go to the earlier pool
entry), and the chosen examples are shown farthest first, nearest last (next
to the input), so a prompt and its cache key depend on the input alone.

    >>> import numpy as np
    >>> state = retrieval_state([{"inputs": {"q": "a"}, "outputs": {"a": "1"}},
    ...                          {"inputs": {"q": "b"}, "outputs": {"a": "2"}}],
    ...                         np.array([[1.0, 0.0], [0.0, 1.0]]), k=1, embedding_model=None)
    >>> [example["outputs"]["a"] for example in nearest(state, np.array([0.1, 0.9]))]
    ['2']
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Sequence

import numpy as np

from promptgym.core.serialization import deserialize_object, serialize_object

VECTOR_DTYPE = "float16"  # ranking uses the stored (rounded) vectors, before and after a save alike
_matrices: dict[str, np.ndarray] = {}
_embedding_models: dict[str, Any] = {}


def example_text(inputs: dict[str, Any]) -> str:
    """What is embedded for an input (a pool example's or the current one): ``"field: value | ..."``."""
    return " | ".join(f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                      for key, value in inputs.items())


def encode_vectors(vectors: np.ndarray) -> dict[str, Any]:
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    array = (array / np.where(norms == 0, 1.0, norms)).astype("<f2")
    return {"dtype": VECTOR_DTYPE, "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def decode_vectors(encoded: dict[str, Any], where: str = "retrieval") -> np.ndarray:
    """The pool's (n, d) float32 matrix; decoded once per distinct data string."""
    data = encoded.get("data") if isinstance(encoded, dict) else None
    if not isinstance(data, str) or encoded.get("dtype") != VECTOR_DTYPE:
        raise ValueError(f"{where}: 'vectors' must be {{'dtype': 'float16', 'shape': [n, d], 'data': base64}}")
    key = hashlib.sha256(data.encode()).hexdigest()
    if key not in _matrices:
        try:
            flat = np.frombuffer(base64.b64decode(data, validate=True), dtype="<f2")
            _matrices[key] = flat.reshape(tuple(encoded["shape"])).astype(np.float32)
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"{where}: 'vectors' do not decode to the shape {encoded.get('shape')}: {error}") from None
    return _matrices[key]


def retrieval_state(pool: Sequence[dict[str, Any]], vectors: np.ndarray, k: int, embedding_model: Any
                    ) -> dict[str, Any]:
    """The JSON a Generator's variable keeps under ``"retrieval"``: the pool, its vectors, ``k``, the model."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if len(pool) != len(vectors):
        raise ValueError(f"{len(pool)} pool examples but {len(vectors)} vectors")
    spec = None if embedding_model is None else serialize_object(embedding_model)
    if spec is not None:  # calls then use this very model (its usage counts them, its vector cache serves them)
        _embedding_models[json.dumps(spec, sort_keys=True)] = embedding_model
    return {"k": int(k),
            "embedding_model": spec,
            "pool": [{"inputs": dict(e["inputs"]), "outputs": dict(e["outputs"])} for e in pool],
            "vectors": encode_vectors(vectors) if len(pool) else {"dtype": VECTOR_DTYPE, "shape": [0, 0], "data": ""}}


def check_retrieval(state: Any, where: str) -> dict[str, Any]:
    """``state`` if it is a well-formed retrieval entry, else a ValueError naming ``where`` and the key."""
    if not isinstance(state, dict):
        raise ValueError(f"{where}: 'retrieval' must be an object, got {type(state).__name__}")
    for key in ("k", "pool", "vectors"):
        if key not in state:
            raise ValueError(f"{where}: 'retrieval' needs the key {key!r}")
    if not isinstance(state["k"], int) or state["k"] < 1:
        raise ValueError(f"{where}: 'retrieval.k' must be an integer >= 1, got {state['k']!r}")
    if state["pool"] and len(decode_vectors(state["vectors"], where)) != len(state["pool"]):
        raise ValueError(f"{where}: 'retrieval' has {len(state['pool'])} pool examples but "
                         f"{len(decode_vectors(state['vectors'], where))} vectors")
    return state


def nearest(state: dict[str, Any], query: np.ndarray) -> list[dict[str, Any]]:
    """The ``k`` pool examples nearest to ``query`` (a unit vector), farthest first, nearest last."""
    pool = state["pool"]
    if not pool:
        return []
    similarity = decode_vectors(state["vectors"]) @ np.asarray(query, dtype=np.float32).astype("<f2").astype(np.float32)
    order = np.lexsort((np.arange(len(pool)), -similarity))[: state["k"]]  # best first; ties: earlier entry
    return [pool[int(index)] for index in order[::-1]]


def embedding_model_of(state: dict[str, Any], where: str) -> Any:
    """The retrieval's EmbeddingModel, built once per configuration (its vector cache is kept)."""
    spec = state.get("embedding_model")
    if spec is None:
        raise ValueError(f"{where}: 'retrieval' names no embedding model, so the input cannot be embedded")
    key = json.dumps(spec, sort_keys=True)
    if key not in _embedding_models:
        _embedding_models[key] = deserialize_object(spec, expected="embedding model")
    return _embedding_models[key]


async def retrieved_examples(state: dict[str, Any], inputs: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The demonstrations to show for ``inputs`` (one embedding call, or none for an input seen before)."""
    check_retrieval(state, where)
    if not state["pool"]:
        return []
    vectors = await embedding_model_of(state, where)([example_text(inputs)])
    return nearest(state, vectors[0])


def describe_retrieval(state: Any) -> str:
    """``"3 nearest of 300 (local/multilingual-e5-small)"`` for summaries."""
    if not isinstance(state, dict):
        return ""
    model = ((state.get("embedding_model") or {}).get("config") or {}).get("model", "?")
    return f"{state.get('k')} nearest of {len(state.get('pool') or [])} ({model})"
