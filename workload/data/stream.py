"""A graph read in chunks, for the out-of-core partitioner: node arrays in memory, edges and
feature rows streamed.

The node-sized arrays (labels, split masks) are held: they cost a few bytes per node. The
edges and the features, which grow with the edge count and the feature width, are streamed
chunk by chunk from their source (OGB raw CSVs, :mod:`.ogb_stream`; the chunked synthetic
generator, :mod:`.synthetic_stream`), each pass reading the source again. The edge chunks
are undirected pairs in either direction; duplicates and self-loops may occur and are
dropped by the partitioner, as :func:`.graph.csr_from_edges` drops them in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.errors import DatasetError

EdgeChunks = Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]
"""(src, dst) chunks of undirected pairs, ids in [0, num_nodes)."""
FeatureChunks = Iterator[npt.NDArray[np.float32]]
"""Consecutive [rows, num_features] float32 blocks, in node order, covering every node."""


@dataclass
class StreamedGraph:
    """A graph whose edges and features are read chunk by chunk."""

    name: str
    num_features: int
    num_classes: int
    y: npt.NDArray[np.int64]
    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]
    edges: Callable[[], EdgeChunks]
    """A fresh pass over the edge pairs."""
    features: Callable[[], FeatureChunks]
    """A fresh pass over the feature rows."""
    edge_pairs_hint: int
    """About how many pairs ``edges`` yields (sizes the partitioner's buckets)."""
    info: dict[str, Any] = field(default_factory=dict)
    """Facts about how the graph was made, kept in META.json (the partitioner adds the
    dropped self-loops and duplicates)."""

    @property
    def num_nodes(self) -> int:
        return len(self.y)

    def validate(self) -> None:
        """Check the node arrays' shapes and ranges."""
        n = self.num_nodes
        if n and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            raise DatasetError(
                f"graph {self.name!r}: labels must lie in [0, num_classes={self.num_classes})"
            )
        for name in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, name)
            if m.dtype != np.bool_ or m.shape != (n,):
                raise DatasetError(f"graph {self.name!r}: {name} must be bool [{n}]")
