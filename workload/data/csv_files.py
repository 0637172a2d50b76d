"""Reading numeric CSV files (gzip or plain) with errors that name the file and the line.

numpy's C parser reads the file; only when it fails is the file scanned again line by
line in Python, to report the first bad line, field and value precisely.
"""

from __future__ import annotations

import gzip
import warnings
import zlib
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
    integer = np.issubdtype(dtype, np.integer)
    kind = "an integer" if integer else "a number"
    convert = int if integer else float
    width = columns
    with _open(path) as f:
        for number, line in enumerate(f, start=1):
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
