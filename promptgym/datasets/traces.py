"""``from_traces``: what ``serve --record`` stored, as training data.

    (x_train, y_train), (x_test, y_test) = from_traces("traces/traces.db", Question, Answer, program="qa",
                                                       holdout=0.2)

A trace becomes an example when people said what the answer should be: its
correction is the label; with ``min_rating`` set, a trace rated at least that
keeps its own output as the label. Inputs seen more than once are one example
(the latest trace's label wins). ``holdout`` keeps the newest fraction apart,
split by time, never shuffled in: the retrained program is compared on
traffic that came after everything it learned from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from promptgym.core.data_model import DataModel
from promptgym.datasets.loaders import DatasetError, to_object_array
from promptgym.traces import Trace, TraceStore


def labelled_traces(store: TraceStore, *, program: str | None = None, version: str | None = None,
                    since: float | None = None, until: float | None = None,
                    min_rating: float | None = None) -> list[tuple[Trace, dict[str, Any]]]:
    """``(trace, label)`` for each labelled trace, oldest first, inputs deduplicated (the latest label wins)."""
    latest: dict[str, tuple[Trace, dict[str, Any]]] = {}
    for trace in store.traces(program=program, version=version, since=since, until=until):
        label = trace.correction
        if label is None and min_rating is not None and trace.rating is not None and trace.rating >= min_rating:
            label = trace.outputs
        if label is None:
            continue
        key = _canonical(trace.inputs)
        latest.pop(key, None)  # re-inserted: the order stays by the latest time an input was seen
        latest[key] = (trace, label)
    return list(latest.values())


def from_traces(source: str | Path | TraceStore, x_model: type[DataModel], y_model: type[DataModel], *,
                program: str | None = None, version: str | None = None, since: float | None = None,
                until: float | None = None, min_rating: float | None = None,
                holdout: float = 0.0) -> Any:
    """Examples from a trace store: ``(x, y)``, or ``((x_train, y_train), (x_test, y_test))`` with ``holdout``.

    Args:
        source: a TraceStore, or the path of its database file (``DIR/traces.db`` of ``serve --record DIR``).
        x_model, y_model: the program's input and output DataModels.
        program, version, since, until: keep traces of this program / version / time range (Unix seconds).
        min_rating: also take a trace's own output as its label when rated at least this (no correction).
        holdout: the newest fraction kept for testing (0: no split).

    A stored input or label that no longer fits the DataModels (the program
    changed since) is a DatasetError naming the trace and the field.
    """
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"from_traces: holdout must be in [0, 1), got {holdout!r}")
    store = source if isinstance(source, TraceStore) else _open(source)
    pairs = labelled_traces(store, program=program, version=version, since=since, until=until,
                            min_rating=min_rating)
    xs, ys = [], []
    for trace, label in pairs:
        xs.append(_build(x_model, trace.inputs, trace, "input"))
        ys.append(_build(y_model, label, trace, "label"))
    x, y = to_object_array(xs), to_object_array(ys)
    if not holdout:
        return x, y
    cut = len(x) - int(round(len(x) * holdout))
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def _open(path: str | Path) -> TraceStore:
    path = Path(path)
    if path.is_dir():
        path = path / "traces.db"
    if not path.is_file():
        raise DatasetError(f"no trace store at {path} (serve --record DIR writes DIR/traces.db)")
    return TraceStore(path)


def _build(model: type[DataModel], values: Any, trace: Trace, what: str) -> DataModel:
    try:
        return model(**values)
    except Exception as error:  # noqa: BLE001 - pydantic's ValidationError, or a non-dict
        raise DatasetError(f"trace {trace.id}: its {what} does not fit {model.__name__}: {error}") from None


def _canonical(inputs: dict[str, Any]) -> str:
    return repr(sorted((str(key), repr(value)) for key, value in inputs.items()))


__all__ = ["from_traces", "labelled_traces"]
