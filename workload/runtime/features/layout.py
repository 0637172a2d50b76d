"""Which holder owns which nodes, and the partitions a holder loads.

A *holder* is a process that holds partitions: a sampler in server-client mode, a trainer
pod in worker mode. It owns the contiguous new-id range of its partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from distgnn_api.contract import partitions_of_holder
from distgnn_workload.partition.store import PartitionStore


@dataclass(frozen=True)
class HolderLayout:
    """Which holder owns which node ids: holder h owns ``[bounds[h], bounds[h+1])``."""

    bounds: Tensor
    """int64 [H+1] on the host."""

    @classmethod
    def from_store(cls, store: PartitionStore, num_holders: int) -> HolderLayout:
        offsets = store.meta.offsets
        parts = store.meta.num_partitions
        bounds = [
            offsets[partitions_of_holder(h, parts, num_holders)[0]] for h in range(num_holders)
        ]
        return cls(torch.tensor([*bounds, offsets[-1]], dtype=torch.int64))

    @property
    def num_holders(self) -> int:
        return int(self.bounds.numel()) - 1

    @property
    def num_nodes(self) -> int:
        return int(self.bounds[-1])

    def range_of(self, holder: int) -> tuple[int, int]:
        return int(self.bounds[holder]), int(self.bounds[holder + 1])

    def holder_of(self, ids: Tensor) -> Tensor:
        """The owning holder of each id (on the ids' device)."""
        return torch.bucketize(ids, self.bounds.to(ids.device)[1:-1], right=True)


def group_by_key(key: Tensor, buckets: int) -> tuple[Tensor, Tensor]:
    """Positions of ``key`` (ints in ``[0, buckets)``) grouped by value, stable, and the count
    of each value.

    The keys are narrowed first to the smallest type that holds ``buckets``: a GPU's radix
    sort then makes one pass over 8-bit keys, not eight over 64-bit ones, with as many fewer
    kernel launches (the feature path sorts a batch's ids by owner once per batch). The
    counts come from the sorted keys (where each value's run ends), with no host sync:
    ``bincount`` reads the largest key back first, which holds a loader until the GPU has
    run everything queued before it.
    """
    if buckets <= 1 << 8:
        key = key.to(torch.uint8)
    elif buckets <= 1 << 15:
        key = key.to(torch.int16)
    ordered, order = torch.sort(key, stable=True)
    values = torch.arange(buckets, dtype=key.dtype, device=key.device)
    ends = torch.searchsorted(ordered, values, right=True)
    return order, torch.diff(ends, prepend=ends.new_zeros(1))


@dataclass
class HolderData:
    """What one holder loads from the store: its features, splits and local CSR."""

    holder: int
    start: int
    end: int
    features: Tensor
    """float32 [end - start, F] on the holder's device."""
    indptr: Tensor
    """int64 CSR of the owned nodes (row i is node start + i), host memory."""
    indices: Tensor
    """Their neighbours as global ids, host memory."""
    train_ids: Tensor
    val_ids: Tensor
    test_ids: Tensor
    """Global ids of the owned nodes in each split (int64, host)."""


def _np(a: np.ndarray) -> Tensor:
    """A tensor owning a copy of a (read-only, memory-mapped) array."""
    return torch.from_numpy(np.array(a, copy=True))


def load_holder(
    store: PartitionStore,
    holder: int,
    num_holders: int,
    device: torch.device,
    feature_dtype: torch.dtype = torch.float32,
) -> HolderData:
    """Read the partitions of ``holder`` (a contiguous id range) from the store.

    ``feature_dtype`` bfloat16 halves feature memory and traffic for bf16 training.
    """
    parts = [
        store.partition(p)
        for p in partitions_of_holder(holder, store.meta.num_partitions, num_holders)
    ]
    start, end = parts[0].start, parts[-1].end
    feats = torch.cat([_np(p.features) for p in parts]) if parts else torch.zeros(0)
    indptrs, offset = [], 0
    for i, p in enumerate(parts):
        ip = _np(p.indptr).to(torch.int64)
        indptrs.append((ip if i == 0 else ip[1:]) + offset)
        offset += int(ip[-1])

    def ids(mask: str) -> Tensor:
        return torch.cat(
            [_np(np.flatnonzero(np.asarray(getattr(p, mask)))) + p.start for p in parts]
        ).to(torch.int64)

    return HolderData(
        holder=holder,
        start=start,
        end=end,
        features=feats.reshape(end - start, store.meta.num_features).to(feature_dtype).to(device),
        indptr=torch.cat(indptrs),
        indices=torch.cat([_np(p.indices) for p in parts]),
        train_ids=ids("train_mask"),
        val_ids=ids("val_mask"),
        test_ids=ids("test_mask"),
    )


def split_ids(store: PartitionStore, layout: HolderLayout, split: str) -> list[Tensor]:
    """Global ids of every holder's nodes in ``split`` (train, val or test)."""
    out = []
    for h in range(layout.num_holders):
        parts = partitions_of_holder(h, store.meta.num_partitions, layout.num_holders)
        out.append(
            torch.cat(
                [
                    _np(np.flatnonzero(np.asarray(getattr(store.partition(p), f"{split}_mask"))))
                    + store.meta.offsets[p]
                    for p in parts
                ]
            ).to(torch.int64)
        )
    return out


def load_labels(store: PartitionStore, device: torch.device) -> Tensor:
    """Labels of every node (8 bytes a node: small enough to keep whole on every holder)."""
    labels = [_np(store.partition(p).labels) for p in range(store.meta.num_partitions)]
    return torch.cat(labels).to(torch.int64).to(device)
