"""Reading numeric CSV files (gzip or plain) with errors that name the file and the line.

numpy's C parser reads the file; only when it fails is the file scanned again line by
line in Python, to report the first bad line, field and value precisely.
"""

from __future__ import annotations

import gzip
import itertools
import warnings
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.errors import DatasetError


def find_csv(folder: Path, stem: str) -> Path | None:
    """``<stem>.csv.gz`` or ``<stem>.csv`` in ``folder``, whichever exists."""
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (folder / name).is_file():
            return folder / name
    return None


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_csv(path: Path, dtype: npt.DTypeLike, columns: int | None = None) -> npt.NDArray[Any]:
    """The file as a [rows, columns] array; ``columns`` None accepts any constant count."""
    dt = np.dtype(dtype)
    try:
        with _open(path) as f, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            data = np.loadtxt(f, delimiter=",", dtype=dt, ndmin=2, comments=None)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise DatasetError(
            f"cannot be read ({err}); is it a complete, uncorrupted file?", source=path
        ) from None
    except ValueError as err:
        _diagnose(path, dt, columns)
        raise DatasetError(f"cannot be parsed: {err}", source=path) from None
    if data.size == 0:
        return np.zeros((0, columns or 0), dtype=dt)
    if columns is not None and data.shape[1] != columns:
        raise DatasetError(f"has {data.shape[1]} columns, expected {columns}", source=path, line=1)
    return data


def _diagnose(path: Path, dtype: np.dtype[Any], columns: int | None) -> None:
    """Raise a DatasetError for the first line numpy could not parse."""
    with _open(path) as f:
        _check_lines(path, enumerate(f, start=1), dtype, columns)


def iter_csv(
    path: Path, dtype: npt.DTypeLike, columns: int | None = None, rows: int = 1 << 20
) -> Iterator[npt.NDArray[Any]]:
    """The file as consecutive [<= rows, columns] arrays, reading ``rows`` lines at a time;
    errors name the file and the line as :func:`read_csv`'s do."""
    dt = np.dtype(dtype)
    first = 0  # lines before the current chunk
    width = columns
    try:
        with _open(path) as f:
            while True:
                lines = list(itertools.islice(f, rows))
                if not lines:
                    return
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        data = np.loadtxt(lines, delimiter=",", dtype=dt, ndmin=2, comments=None)
                except ValueError as err:
                    _diagnose_lines(path, lines, first, dt, width)
                    raise DatasetError(f"cannot be parsed: {err}", source=path) from None
                if data.size:
                    if width is None:
                        width = data.shape[1]
                    if data.shape[1] != width:
                        _diagnose_lines(path, lines, first, dt, width)
                        raise DatasetError(
                            f"has {data.shape[1]} columns, expected {width}",
                            source=path,
                            line=first + 1,
                        )
                    yield data
                first += len(lines)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise DatasetError(
            f"cannot be read ({err}); is it a complete, uncorrupted file?", source=path
        ) from None


def _diagnose_lines(
    path: Path, lines: list[str], first: int, dtype: np.dtype[Any], columns: int | None
) -> None:
    """Raise a DatasetError for the first of ``lines`` (line ``first + 1`` on) that is bad."""
    _check_lines(path, enumerate(lines, start=first + 1), dtype, columns)


def _check_lines(
    path: Path, numbered: Iterable[tuple[int, str]], dtype: np.dtype[Any], columns: int | None
) -> None:
    integer = np.issubdtype(dtype, np.integer)
    kind = "an integer" if integer else "a number"
    convert = int if integer else float
    width = columns
    for number, line in numbered:
        text = line.strip()
        if not text:
            continue
        fields = text.split(",")
        if width is None:
            width = len(fields)
        if len(fields) != width:
            raise DatasetError(
                f"has {len(fields)} columns, expected {width}", source=path, line=number
            )
        for col, field in enumerate(fields, start=1):
            try:
                convert(field)
            except ValueError:
                raise DatasetError(
                    f"column {col} is {field.strip()!r}, not {kind}", source=path, line=number
                ) from None
