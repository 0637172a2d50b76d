"""Rows of the partition store by id range: features, labels and split masks.

Every pod reads the store on the shared volume, so each trainer reads its share's
features, labels and masks there rather than asking the holders: :class:`StoreRows` by
global id range of a homogeneous store (contiguous reads of whole partitions' rows),
:func:`typed_feature_range` by type-local id range of any store read as a typed one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.partition.store import HeteroPartitionStore, PartitionData, PartitionStore

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


def typed_feature_range(
    store: HeteroPartitionStore, node_type: str, lo: int, hi: int
) -> npt.NDArray[np.float32]:
    """``[hi - lo, F]`` float32 features of the ``node_type`` ids ``[lo, hi)``, read from each
    partition's memory-mapped rows of the type."""
    width = store.meta.num_features[node_type]
    if width <= 0:
        raise ValueError(f"node type {node_type!r} has no features in the typed store")
    out = np.zeros((hi - lo, width), dtype=np.float32)
    for p in range(store.num_partitions):
        part = store.partition(p)
        nodes = np.asarray(part.nodes[node_type])  # ascending
        a, b = np.searchsorted(nodes, [lo, hi])
        if a < b:
            out[nodes[a:b] - lo] = np.asarray(part.x[node_type][a:b])
    return out
