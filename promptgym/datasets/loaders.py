"""Generic loaders: JSONL and CSV files into NumPy arrays of DataModels.

Each row of the file becomes one input DataModel (and one target DataModel
when ``y_model`` is given). A field mapping says which column or key feeds
which field; without one, each field reads the key of the same name::

    class Question(DataModel):
        question: str = Field(description="A question")

    class Answer(DataModel):
        answer: str = Field(description="The answer")

    x, y = load_jsonl("qa.jsonl", Question, Answer,
                      x_fields={"question": "prompt"},       # field <- key
                      y_fields={"answer": "label.text"})     # dotted = nested key

A bad row raises :class:`DatasetError` naming the file, the line and the
field, and saying what was expected.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

from promptgym.core.data_model import DataModel

__all__ = [
    "DatasetError",
    "load_csv",
    "load_jsonl",
    "records_to_arrays",
    "to_object_array",
    "train_test_split",
]

_MISSING = object()


class DatasetError(ValueError):
    """A data file or record that cannot become the requested DataModels.

    ``path``, ``line`` and ``field`` say where (each may be ``None``).
    """

    def __init__(self, message: str, *, path: str | None = None,
                 line: int | None = None, field: str | None = None) -> None:
        where = ", ".join(p for p in (path, f"line {line}" if line is not None else None) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.path, self.line, self.field = path, line, field


def to_object_array(items: Iterable[Any]) -> np.ndarray:
    """A 1-D NumPy object array holding ``items`` as they are.

    ``np.array(list_of_models)`` may try to unpack pydantic models (they are
    iterable); filling a preallocated array never does.
    """
    items = list(items)
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def train_test_split(x: Sequence[Any], y: Sequence[Any] | None = None, *,
                     test_size: float = 0.2, seed: int = 0):
    """Seeded shuffle-and-split of aligned arrays.

    ``test_size`` is a fraction in (0, 1) or a count. Returns
    ``(x_train, y_train), (x_test, y_test)``, or ``x_train, x_test`` without ``y``.
    """
    n = len(x)
    if y is not None and len(y) != n:
        raise ValueError(f"x has {n} items but y has {len(y)}")
    if isinstance(test_size, float):
        if not 0.0 < test_size < 1.0:
            raise ValueError(f"test_size as a fraction must be in (0, 1), got {test_size}")
        n_test = round(n * test_size)
    else:
        n_test = int(test_size)
    if not 0 <= n_test <= n:
        raise ValueError(f"test_size {test_size} does not fit {n} items")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    test_idx, train_idx = order[:n_test], order[n_test:]

    def take(a, idx):
        return to_object_array(a[i] for i in idx)

    if y is None:
        return take(x, train_idx), take(x, test_idx)
    return (take(x, train_idx), take(y, train_idx)), (take(x, test_idx), take(y, test_idx))


def _lookup(record: Mapping[str, Any], key: str) -> Any:
    if key in record:
        return record[key]
    value: Any = record
    for part in key.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _build(model: type[DataModel], mapping: Mapping[str, str] | None,
           record: Mapping[str, Any], *, path: str | None, line: int | None,
           csv_mode: bool) -> DataModel:
    fields = model.model_fields
    if mapping is None:
        mapping = {name: name for name in fields}
    unknown = [name for name in mapping if name not in fields]
    if unknown:
        raise DatasetError(
            f"field mapping names {unknown} but {model.__name__} has fields {list(fields)}",
            path=path, line=line, field=unknown[0])
    values: dict[str, Any] = {}
    for name, key in mapping.items():
        value = _lookup(record, key)
        if value is _MISSING:
            if not fields[name].is_required():
                continue
            have = sorted(record) if isinstance(record, Mapping) else []
            raise DatasetError(
                f"field '{name}' of {model.__name__}: key '{key}' is missing "
                f"(the row has keys {have})", path=path, line=line, field=name)
        if csv_mode and value == "" and not fields[name].is_required():
            continue  # an empty CSV cell means "use the default"
        values[name] = value
    for name, info in fields.items():
        if name not in mapping and info.is_required():
            raise DatasetError(
                f"field '{name}' of {model.__name__} is required but the field mapping "
                f"does not say which key feeds it", path=path, line=line, field=name)
    try:
        # CSV cells are strings: lax mode turns "3" into 3 and "true" into True.
        return model.model_validate(values, strict=False)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(p) for p in err["loc"]) or "?"
        top = str(err["loc"][0]) if err["loc"] else name
        key = mapping.get(top, top)
        got = err.get("input")
        raise DatasetError(
            f"field '{name}' of {model.__name__} (from key '{key}'): {err['msg']}, "
            f"got {got!r}", path=path, line=line, field=top) from None


def records_to_arrays(records: Iterable[tuple[int | None, Mapping[str, Any]]] | Iterable[Mapping[str, Any]],
                      x_model: type[DataModel], y_model: type[DataModel] | None = None, *,
                      x_fields: Mapping[str, str] | None = None,
                      y_fields: Mapping[str, str] | None = None,
                      path: str | None = None, limit: int | None = None,
                      csv_mode: bool = False):
    """Turn dict records into ``(x, y)`` object arrays (``x`` alone without ``y_model``).

    ``records`` yields dicts or ``(line_number, dict)`` pairs; the line number
    goes into error messages.
    """
    xs, ys = [], []
    for i, item in enumerate(records):
        if limit is not None and len(xs) >= limit:
            break
        line, record = item if isinstance(item, tuple) else (i + 1, item)
        if not isinstance(record, Mapping):
            raise DatasetError(f"expected a JSON object, got {type(record).__name__}",
                               path=path, line=line)
        xs.append(_build(x_model, x_fields, record, path=path, line=line, csv_mode=csv_mode))
        if y_model is not None:
            ys.append(_build(y_model, y_fields, record, path=path, line=line, csv_mode=csv_mode))
    if y_model is None:
        return to_object_array(xs)
    return to_object_array(xs), to_object_array(ys)


def _open_text(path: Path) -> io.TextIOBase:
    # utf-8-sig: a byte-order mark (Excel, Notepad) is read as nothing, not as part of the first key.
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _unreadable(path: Path, error: Exception) -> DatasetError:
    """A DatasetError for a file that isn't UTF-8 text (naming the line) or a broken gzip file."""
    if isinstance(error, UnicodeDecodeError):
        try:
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            data.decode("utf-8-sig")
        except UnicodeDecodeError as located:
            line = data[:located.start].count(b"\n") + 1
            return DatasetError(f"not UTF-8 text (byte {data[located.start]:#04x}); save the file as UTF-8",
                                path=str(path), line=line)
        except (OSError, EOFError):
            pass
        return DatasetError("not UTF-8 text; save the file as UTF-8", path=str(path))
    return DatasetError(f"can't be read ({type(error).__name__}: {error})", path=str(path))


_READ_ERRORS = (UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error, OSError)


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line_number, parsed_json)`` for each non-blank line (``.gz`` is read too)."""
    path = Path(path)
    try:
        with _open_text(path) as f:
            for lineno, text in enumerate(f, start=1):
                if not text.strip():
                    continue
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"invalid JSON ({exc.msg} at column {exc.colno})",
                                       path=str(path), line=lineno) from None
                yield lineno, value
    except _READ_ERRORS as error:
        raise _unreadable(path, error) from None


def load_jsonl(path: str | Path, x_model: type[DataModel],
               y_model: type[DataModel] | None = None, *,
               x_fields: Mapping[str, str] | None = None,
               y_fields: Mapping[str, str] | None = None,
               limit: int | None = None):
    """Load a JSON Lines file (optionally gzipped) into DataModel arrays.

    ``x_fields`` / ``y_fields`` map a DataModel field to a key of each JSON
    object (``"a.b"`` reads nested objects, ``"items.0"`` list items); the
    default maps each field to the key of the same name. Fields with a
    default may be absent. Returns ``(x, y)`` when ``y_model`` is given,
    else ``x``. Blank lines are skipped.

    >>> x, y = load_jsonl("qa.jsonl", Question, Answer)  # doctest: +SKIP
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError("no such file", path=str(path))
    return records_to_arrays(iter_jsonl(path), x_model, y_model, x_fields=x_fields,
                             y_fields=y_fields, path=str(path), limit=limit)


def load_csv(path: str | Path, x_model: type[DataModel],
             y_model: type[DataModel] | None = None, *,
             x_fields: Mapping[str, str] | None = None,
             y_fields: Mapping[str, str] | None = None,
             delimiter: str = ",", limit: int | None = None):
    """Load a CSV file with a header row into DataModel arrays.

    Mapping as in :func:`load_jsonl`, with column names as keys. Cells are
    strings; pydantic converts them to the field's type (``"3"`` -> ``3``).
    An empty cell leaves a field with a default at its default. Line numbers
    in errors are the file's physical lines (the header is line 1).
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError("no such file", path=str(path))

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        try:
            yield from read_rows()
        except _READ_ERRORS as error:
            raise _unreadable(path, error) from None

    def read_rows() -> Iterator[tuple[int, dict[str, str]]]:
        with _open_text(path) as f:
            reader = csv.reader(f, delimiter=delimiter)
            header = next(reader, None)
            if not header:
                raise DatasetError("empty file, expected a header row", path=str(path), line=1)
            start = reader.line_num + 1
            for cells in reader:
                line, start = start, reader.line_num + 1
                if not cells:
                    continue  # blank line
                if len(cells) != len(header):
                    raise DatasetError(
                        f"{len(cells)} cells but the header has {len(header)} columns "
                        f"({header})", path=str(path), line=line)
                yield line, dict(zip(header, cells))

    return records_to_arrays(rows(), x_model, y_model, x_fields=x_fields, y_fields=y_fields,
                             path=str(path), limit=limit, csv_mode=True)
