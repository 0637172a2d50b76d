"""What a link-prediction dataset loads into, before it is split and partitioned.

A :class:`LinkData` is a homogeneous graph in the dataset's own node ids: node features and
every known edge as a directed pair (``src`` cites or links to ``dst``). A dataset with its
own split (an OGB link dataset) carries it in ``given``: the valid and test positives and,
where the dataset has them, each positive's fixed negative destinations. Nothing here
imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.errors import DatasetError

IdArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class GivenEdges:
    """One split of a dataset's own edge split, in dataset ids."""

    src: IdArray
    dst: IdArray
    dst_neg: npt.NDArray[np.integer[Any]] | None = None
    """[E, K] negative destinations of each positive (ogbl-citation2's target_node_neg;
    int32 or int64)."""

    def __len__(self) -> int:
        return len(self.src)


@dataclass
class LinkData:
    """A homogeneous graph for link prediction: features and directed edges, dataset ids."""

    x: npt.NDArray[np.float32]
    src: IdArray
    dst: IdArray
    name: str = "graph"
    given: dict[str, GivenEdges] | None = None
    """The dataset's own split ("train", "valid", "test"), or None."""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return len(self.src)

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def validate(self) -> None:
        """Check shapes, dtypes and id ranges of the edges and of the given split."""
        n = self.num_nodes
        where = f"graph {self.name!r}"
        if self.x.dtype != np.float32 or self.x.ndim != 2:
            raise DatasetError(f"{where}: x must be float32 [N, F], got {self.x.dtype}")
        pairs: list[tuple[str, npt.NDArray[np.integer[Any]]]] = [
            ("src", self.src),
            ("dst", self.dst),
        ]
        for name, split in (self.given or {}).items():
            pairs += [(f"{name}.src", split.src), (f"{name}.dst", split.dst)]
            if split.dst_neg is not None:
                if split.dst_neg.ndim != 2 or len(split.dst_neg) != len(split.src):
                    raise DatasetError(
                        f"{where}: {name} negatives must be [{len(split.src)}, K], "
                        f"got {split.dst_neg.shape}"
                    )
                pairs.append((f"{name}.dst_neg", split.dst_neg))
        for name, ids in pairs:
            if ids.dtype != np.int64:
                raise DatasetError(f"{where}: {name} must be int64, got {ids.dtype}")
            if ids.size and (ids.min() < 0 or ids.max() >= n):
                raise DatasetError(f"{where}: {name} holds a node id outside [0, {n})")
        if len(self.src) != len(self.dst):
            raise DatasetError(f"{where}: src and dst differ in length")
