"""A user's data file read into numbered records: the one reader of the `jsonl` task's file and
of a task file's data (`taskfile`). Each row is (row, record) or (row, the DataError of that
row), so that a task's `skip_invalid` can skip a bad row and its strict mode name it.

Rows are numbered as the user sees them: the line for JSONL, the line where the record starts
for CSV (the header is line 1), the item from 1 for a .json list.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ensemble.errors import DataError

from .base import fit_csv_cells

__all__ = ["data_records"]


def data_records(path: Path, *, columns: Sequence[str] = (), json_list: bool = False
                 ) -> Iterator[tuple[int, Any]]:
    """(row, record or that row's DataError) of a .jsonl, .csv or (with `json_list`) .json
    file, a list of records; without `json_list` a .json file is read as JSONL. `columns`: the
    ones a CSV header must name. Blank lines and CSV rows of empty cells are no records. A
    problem with the whole file (unreadable, not UTF-8, a CSV header or a .json document) is
    raised as one DataError."""
    text = _text(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        yield from _csv_records(path, text, columns)
    elif suffix == ".json" and json_list:
        yield from _json_list(path, text)
    else:
        yield from _jsonl_records(path, text)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError("file not found", path=str(path)) from None
    except IsADirectoryError:
        raise DataError("is a directory, expected a .jsonl or .csv file", path=str(path)) from None
    except UnicodeDecodeError:
        raise DataError("not UTF-8 text", path=str(path)) from None
    except OSError as exc:
        raise DataError(f"cannot read ({exc.strerror})", path=str(path)) from None


def _jsonl_records(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            # "\ud800" is valid JSON but no text: it could never be sent to a model
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except json.JSONDecodeError as exc:
            yield i, DataError(f"not valid JSON ({exc.msg} at column {exc.colno})",
                               path=str(path), row=i)
        except UnicodeEncodeError:
            yield i, DataError("holds a lone surrogate escape such as \\ud800 (not text); "
                               "fix or drop that escape", path=str(path), row=i)
        else:
            yield i, row


def _csv_records(path: Path, text: str, columns: Sequence[str]) -> Iterator[tuple[int, Any]]:
    fit_csv_cells(text)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise DataError(f"malformed CSV ({exc})", path=str(path), row=reader.line_num) from None
    for col in columns:
        if col not in header:
            raise DataError(f"the header has no {col!r} column (columns: "
                            f"{', '.join(header) or 'none'})", path=str(path), row=1, field=col)
    start = reader.line_num + 1
    try:
        for rec in reader:
            if None in rec:  # more cells than header columns
                yield start, DataError("more cells than header columns", path=str(path),
                                       row=start)
            elif any((v or "").strip() for v in rec.values()):
                yield start, rec
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"malformed CSV ({exc})", path=str(path), row=reader.line_num) from None


def _json_list(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg} at line {exc.lineno})", path=str(path)
                        ) from None
    if not isinstance(doc, list):
        raise DataError("a .json data file is a list of records (or write JSONL)",
                        path=str(path))
    yield from enumerate(doc, start=1)
