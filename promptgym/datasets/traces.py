"""``from_traces``: what ``serve --record`` stored, as training data.

    x, y = from_traces("traces", program="qa")          # DataModels rebuilt from the schemas serve stored
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
from promptgym.core.schema import data_model_from_schema
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
        key = input_key(trace.inputs)
        latest.pop(key, None)  # re-inserted: the order stays by the latest time an input was seen
        latest[key] = (trace, label)
    return list(latest.values())


def from_traces(source: str | Path | TraceStore, x_model: type[DataModel] | None = None,
                y_model: type[DataModel] | None = None, *,
                program: str | None = None, version: str | None = None, since: float | None = None,
                until: float | None = None, min_rating: float | None = None,
                holdout: float = 0.0) -> Any:
    """Examples from a trace store: ``(x, y)``, or ``((x_train, y_train), (x_test, y_test))`` with ``holdout``.

    Args:
        source: a TraceStore, or the path of its database file (``DIR/traces.db`` of ``serve --record DIR``).
        x_model, y_model: the program's input and output DataModels (default: rebuilt from the schemas the
            server stored for ``program``, so a script needs no import of the program's code).
        program, version, since, until: keep traces of this program / version / time range (Unix seconds).
        min_rating: also take a trace's own output as its label when rated at least this (no correction).
        holdout: the newest fraction kept for testing (0: no split).

    A stored input or label that no longer fits the DataModels (the program
    changed since) is a DatasetError naming the trace and the field.
    """
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"from_traces: holdout must be in [0, 1), got {holdout!r}")
    store = source if isinstance(source, TraceStore) else open_trace_store(source)
    if x_model is None or y_model is None:
        stored_x, stored_y = _stored_models(store, program, version)
        x_model, y_model = x_model or stored_x, y_model or stored_y
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


def open_trace_store(path: str | Path) -> TraceStore:
    """The store at ``path`` (a ``serve --record`` folder or its ``traces.db``); DatasetError if there is none."""
    path = Path(path)
    if path.is_dir():
        path = path / "traces.db"
    if not path.is_file():
        raise DatasetError(f"no trace store at {path} (serve --record DIR writes DIR/traces.db)")
    return TraceStore(path)


def _stored_models(store: TraceStore, program: str | None, version: str | None) -> tuple[type[DataModel], ...]:
    """The input and output DataModels of the program's newest described version (``version`` if given)."""
    served = store.programs()
    names = sorted({name for name, _ in served})
    if program is None:
        if len(names) != 1:
            raise DatasetError(f"from_traces: the store holds the programs {', '.join(names) or 'none'}: name one with "
                               "program=NAME, or pass x_model and y_model")
        program = names[0]
    versions = [found for name, found in served if name == program and (version is None or found == version)]
    schemas = next((store.program_schemas(program, found) for found in reversed(versions)
                    if store.program_schemas(program, found) is not None), None)
    if schemas is None:
        raise DatasetError(f"from_traces: no stored schema for program {program!r}"
                           f"{f' version {version!r}' if version else ''} (traces from a server older than the "
                           "schemas): pass x_model and y_model")
    return (data_model_from_schema(schemas[0], name=f"{program}_input"),
            data_model_from_schema(schemas[1], name=f"{program}_output"))


def _build(model: type[DataModel], values: Any, trace: Trace, what: str) -> DataModel:
    try:
        return model(**values)
    except Exception as error:  # noqa: BLE001 - pydantic's ValidationError, or a non-dict
        raise DatasetError(f"trace {trace.id}: its {what} does not fit {model.__name__}: {error}") from None


def input_key(inputs: dict[str, Any]) -> str:
    """One string per distinct input (key order aside): inputs seen twice are one example."""
    return repr(sorted((str(key), repr(value)) for key, value in inputs.items()))


__all__ = ["from_traces", "input_key", "labelled_traces", "open_trace_store"]
