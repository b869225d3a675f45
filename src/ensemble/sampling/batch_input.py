"""Batch mode's input files: the lines of the claimed samples, in the provider's wire format
(its `BatchAPI.request_lines`: each prompt's body encoded once), written line by line to
temporary files within the provider's limits and uploaded from there, so a paper-sized input
file is never held in memory (nor copied for the upload: the HTTP client streams the open file).

    lines = input_lines([(key, [0, 1, 2, ...]), ...], writer_of, per_line=10)
    files = list(input_files(lines, max_lines=50_000, max_bytes=200 << 20))  # on disk
    for batch_lines, file in files:
        ...  # record the batch, upload `file`, close it
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO

from ..errors import InputError
from ..providers.openai_wire import LineWriter
from .batch_options import custom_id
from .run import contiguous
from .store import BatchLine

__all__ = ["input_files", "input_lines"]


def input_lines(todo: Iterable[tuple[str, Sequence[int]]],
                writer_of: Callable[[str], LineWriter], per_line: int
                ) -> Iterator[tuple[BatchLine, bytes]]:
    """The lines (and their bytes) of the samples `todo` names ((key, indices), the indices of
    one key together): contiguous indices in lines of at most `per_line` samples, each written
    by `writer_of(key)` (the provider's `request_lines` of the key's prompt) from its
    custom_id and its count of samples."""
    for key, indices in todo:
        write = writer_of(key)
        for run in contiguous(indices):
            for a in range(0, len(run), per_line):
                count = min(per_line, len(run) - a)
                cid = custom_id(key, run[a], count)
                yield BatchLine(cid, key, run[a], count), write(cid, count)


def input_files(lines: Iterable[tuple[BatchLine, bytes]], *, max_lines: int, max_bytes: int
                ) -> Iterator[tuple[list[BatchLine], IO[bytes]]]:
    """The lines split into input files of at most `max_lines` lines and `max_bytes` bytes,
    each written to a temporary file (deleted when closed: the caller closes the files it
    gets) and rewound. InputError for a line larger than a file may be."""
    file: IO[bytes] | None = None
    batch: list[BatchLine] = []
    size = 0
    try:
        for ln, data in lines:
            if len(data) > max_bytes:
                raise InputError(f"one batch line is {len(data)} bytes, more than the "
                                 f"provider's {max_bytes} per file")
            if file is not None and (len(batch) >= max_lines or size + len(data) > max_bytes):
                done, file, batch, size = (batch, _rewound(file)), None, [], 0
                yield done
            if file is None:
                file = _temporary()
            file.write(data)
            batch.append(ln)
            size += len(data)
    except BaseException:
        if file is not None:
            file.close()
        raise
    if file is not None:
        yield batch, _rewound(file)


def _temporary() -> IO[bytes]:
    """An anonymous temporary file (POSIX: a plain binary file object, what the HTTP clients
    stream); where `TemporaryFile` is only a wrapper, which the openai SDK does not take for
    a file, the lines stay in memory."""
    f = tempfile.TemporaryFile()
    if isinstance(f, io.IOBase):
        return f
    f.close()  # pragma: no cover - not on POSIX
    return io.BytesIO()  # pragma: no cover


def _rewound(file: IO[bytes]) -> IO[bytes]:
    file.flush()
    file.seek(0)
    return file
