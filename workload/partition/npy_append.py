"""``.npy`` files written chunk by chunk, without memory-mapping them: one of known shape
(:class:`NpyWriter`), and one of unknown length (:class:`GrowingNpyWriter`), whose header is
written first with room for any length (padded with spaces, as the format allows) and
rewritten with the real shape on close, so the data is never copied.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Self

import numpy as np
import numpy.typing as npt

_MAGIC = b"\x93NUMPY\x02\x00"  # format version 2.0: a 4-byte header length
_ALIGN = 64
_WIDEST = 2**63 - 1


def _header(dtype: np.dtype[Any], length: int, size: int | None = None) -> bytes:
    text = repr(
        {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
    ).encode("latin1")
    if size is None:
        size = -(-(len(_MAGIC) + 4 + len(text) + 1) // _ALIGN) * _ALIGN
    pad = size - len(_MAGIC) - 4 - len(text) - 1
    if pad < 0:
        raise ValueError("npy header does not fit its reserved space")
    body = text + b" " * pad + b"\n"
    return _MAGIC + len(body).to_bytes(4, "little") + body


class _Appender:
    """An open ``.npy`` file that chunks are appended to; fsynced and closed on a clean exit
    of its ``with`` block, only closed on an error."""

    def __init__(self, path: Path, dtype: npt.DTypeLike) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.written = 0
        self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 (closed in close())

    def append(self, chunk: npt.NDArray[Any]) -> None:
        data = np.ascontiguousarray(chunk, dtype=self.dtype)
        self.written += data.size
        self._check()
        self._f.write(data.data)

    def _check(self) -> None:
        """Refuse what was appended so far (a writer of known shape: too much)."""

    def _finish(self) -> None:
        """Complete the file before it is flushed and closed."""

    def close(self) -> None:
        self._finish()
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._f.close()


class NpyWriter(_Appender):
    """Appends chunks to a ``.npy`` file of known shape."""

    def __init__(self, path: Path, dtype: npt.DTypeLike, shape: tuple[int, ...]) -> None:
        super().__init__(path, dtype)
        self.shape = shape
        self.expected = int(np.prod(shape, dtype=np.int64))
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": shape,
        }
        np.lib.format.write_array_header_2_0(self._f, header)

    def _check(self) -> None:
        if self.written > self.expected:
            raise RuntimeError(f"{self.path}: more than {self.expected} elements written")

    def _finish(self) -> None:
        if self.written != self.expected:
            raise RuntimeError(f"{self.path}: wrote {self.written} of {self.expected} elements")


def save_array(path: Path, array: npt.NDArray[Any]) -> None:
    with NpyWriter(path, array.dtype, array.shape) as w:
        w.append(array)


class GrowingNpyWriter(_Appender):
    """Appends 1-D chunks of ``dtype`` to ``path``; the length is fixed on :meth:`close`."""

    def __init__(self, path: Path, dtype: npt.DTypeLike) -> None:
        super().__init__(path, dtype)
        self._size = len(_header(self.dtype, _WIDEST))
        self._f.write(_header(self.dtype, 0, self._size))

    def _finish(self) -> None:
        self._f.seek(0)
        self._f.write(_header(self.dtype, self.written, self._size))
