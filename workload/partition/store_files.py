"""The files of a complete partition store, as its readers (:mod:`.store`) open them: each
array a ``.npy`` file memory-mapped on demand, a missing or truncated one a
:class:`~.meta.StoreError` that says to partition again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.partition.meta import StoreError


class StoreFiles:
    """The files of a complete store at ``path``, memory-mapped on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self, *parts: str) -> npt.NDArray[Any]:
        file = self.path.joinpath(*parts)
        try:
            return np.load(file, mmap_mode="r")  # type: ignore[no-any-return]
        except (OSError, ValueError) as err:
            # A truncated file makes mmap raise ValueError ("mmap length is greater than file size").
            raise StoreError(
                f"{file} is missing, truncated or unreadable ({err}); delete {self.path} "
                "to partition again"
            ) from None

    def _check_partition(self, p: int, k: int) -> None:
        if not 0 <= p < k:
            raise IndexError(f"partition {p} out of range [0, {k})")
