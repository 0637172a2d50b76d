"""Rows of the partition store by global id range: features, labels and split masks.

Every pod reads the store on the shared volume, so each trainer reads its share's
features, labels and masks there rather than asking the holders.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.partition.store import PartitionData, PartitionStore

SPLITS = ("train", "val", "test")


class StoreRows:
    """Reads rows of the store's per-partition arrays (memory-mapped) by global id range."""

    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self.offsets = store.offsets
        self.parts: list[PartitionData] = [store.partition(p) for p in range(store.num_partitions)]
        self.num_features = store.meta.num_features

    def feature_range(self, lo: int, hi: int) -> npt.NDArray[np.float32]:
        """``[hi - lo, F]`` float32 features of the ids ``[lo, hi)`` (contiguous reads)."""
        return self._range("features", lo, hi).reshape(-1, self.num_features)

    def labels(self, lo: int, hi: int) -> npt.NDArray[np.int64]:
        """Labels of the ids ``[lo, hi)``."""
        return self._range("labels", lo, hi).astype(np.int64, copy=False)

    def mask(self, split: str, lo: int, hi: int) -> npt.NDArray[np.bool_]:
        """The ``split`` mask (train, val or test) of the ids ``[lo, hi)``."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
        return self._range(f"{split}_mask", lo, hi).astype(np.bool_, copy=False)

    def _range(self, name: str, lo: int, hi: int) -> npt.NDArray[Any]:
        pieces = []
        for part in self.parts:
            a, b = max(lo, part.start), min(hi, part.end)
            if a < b:
                pieces.append(np.asarray(getattr(part, name)[a - part.start : b - part.start]))
        if not pieces:
            return np.zeros(0)
        return np.concatenate(pieces)
