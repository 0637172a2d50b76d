"""The feature table of one holder: its own rows plus cached remote rows.

``slot[id]`` is the row of a node's features in ``rows`` (local rows first, cached rows
after), or -1 when it must be fetched. With a cache ratio of 1 every node has a row and a
gather is one GPU kernel, no host sync.
"""

from __future__ import annotations

import torch
from torch import Tensor

from distgnn_workload.runtime.features.layout import HolderData


class FeatureTable:
    """Local rows plus cached remote rows, addressed by a global ``slot`` map."""

    def __init__(self, data: HolderData, num_nodes: int, device: torch.device) -> None:
        self.device = device
        self.start, self.end = data.start, data.end
        self.num_nodes = num_nodes
        self.num_features = int(data.features.shape[1])
        self.rows = data.features
        self.slot = torch.full((num_nodes,), -1, dtype=torch.int32, device=device)
        self.slot[data.start : data.end] = torch.arange(
            data.end - data.start, dtype=torch.int32, device=device
        )
        self.num_cached = 0
        self._free = int(self.rows.shape[0])

    @property
    def num_remote(self) -> int:
        return self.num_nodes - (self.end - self.start)

    @property
    def complete(self) -> bool:
        """Every node has a row: gathers need no RPC and no host sync."""
        return self.num_cached >= self.num_remote

    def reserve(self, count: int) -> None:
        """Make room for ``count`` more cached rows (one allocation for the whole cache)."""
        if count > 0:
            extra = torch.empty(
                (count, self.num_features), dtype=self.rows.dtype, device=self.device
            )
            self.rows = torch.cat([self.rows, extra])
            self._free = int(self.rows.shape[0]) - count

    def add_cached(self, ids: Tensor, rows: Tensor) -> None:
        """Keep ``rows`` as the features of the remote nodes ``ids`` (after :meth:`reserve`)."""
        n = int(ids.numel())
        if n == 0:
            return
        if self._free + n > int(self.rows.shape[0]):
            self.reserve(self._free + n - int(self.rows.shape[0]))
        base = self._free
        self.rows[base : base + n] = rows.to(self.device, self.rows.dtype)
        self.slot[ids.to(self.device)] = torch.arange(
            base, base + n, dtype=torch.int32, device=self.device
        )
        self._free += n
        self.num_cached += n

    def local_rows(self, ids: Tensor) -> Tensor:
        """Features of nodes this holder owns (ids on any device)."""
        return self.rows[(ids.to(self.device) - self.start)]
