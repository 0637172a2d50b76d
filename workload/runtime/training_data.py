"""What a trainer trains on, from the partition store of either graph kind, and the checks of
that store against the job (:func:`check_store` for a one-type graph's store,
:func:`open_typed_store` for a typed one's: a clear error naming the fields to fix).

A one-type graph's holders read their partitions' topology, rows and labels themselves
(:mod:`~distgnn_workload.runtime.holder`), and a trainer's seeds of each split are
:func:`~distgnn_workload.runtime.features.split_ids`. :class:`HeteroTrainingData` is the
trainer's view of a typed graph, whatever wrote it:

- the typed in-CSR the sampler draws from (``in_csr``, global typed ids);
- the features of the node types that have them (``x``, rows by global typed id);
- the labels of the target type (``y``, -1 where a node has none);
- the train, validation and test ids of the target type, grouped by the partition that owns
  them (the seeds of partition ``p`` are drawn by the ranks that serve it);
- per featureless node type, the partition that owns each node (``book``): the rows of its
  learnt embedding live on the ranks that serve that partition.

:func:`from_graph` builds it from a :class:`HeteroGraphData` and an assignment of typed nodes
to partitions; :func:`from_store` from the typed partition store. Both give every trainer
the whole typed topology (the store replicates it) and, unless told otherwise, the features
of every featured node (the store's per-partition rows scattered back to their ids). A
worker-mode trainer reads no rows here (``features=False``): it holds its partition's rows
and a hot cache per type, and fetches the rest from their owners
(:func:`distgnn_workload.runtime.features.cache_policy.load_typed_tables`). In server-client mode the sampler
servers read it whole, and the trainers read it without topology and rows (``graph=False``).
:func:`open_typed_store` opens the store for a job's holders, with a clear error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.data.graph import GraphTypes, HeteroGraphData
from distgnn_workload.partition.meta import StoreError
from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore
from distgnn_workload.runtime.lifecycle import BadInputError

Book = Mapping[str, npt.ArrayLike | Tensor]
"""Per node type: the partition of each node (by type-local id)."""


@dataclass
class HeteroTrainingData(GraphTypes):
    """A typed graph as the training loop uses it (see the module docstring)."""

    node_counts: dict[str, int]
    in_csr: dict[EdgeType, tuple[Tensor, Tensor]]
    x: dict[str, Tensor]
    y: Tensor
    target_node_type: str
    num_classes: int
    train_ids: list[Tensor]
    val_ids: list[Tensor]
    test_ids: list[Tensor]
    book: dict[str, Tensor]

    @property
    def num_partitions(self) -> int:
        return len(self.train_ids)

    def in_channels(self, embedding_dim: int) -> dict[str, int]:
        """The input width of every node type: its features, else the embedding size."""
        return {
            t: int(self.x[t].shape[1]) if t in self.x else embedding_dim for t in self.node_counts
        }

    def majority_share(self, split: str = "test") -> float:
        """The share of the split's most frequent class (what guessing it scores)."""
        ids = torch.cat(getattr(self, f"{split}_ids"))
        if ids.numel() == 0:
            return 0.0
        counts = torch.bincount(self.y[ids], minlength=self.num_classes)
        return float(counts.max()) / ids.numel()


def _by_partition(ids: npt.ArrayLike, owner: Tensor, k: int) -> list[Tensor]:
    t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    of = owner[t]
    return [t[of == p] for p in range(k)]


def from_graph(graph: HeteroGraphData, book: Book, num_partitions: int) -> HeteroTrainingData:
    """The whole graph, its seeds split by ``book[target]``; ``book`` covers every type."""
    missing = sorted(set(graph.node_types) - set(book))
    if missing:
        raise ValueError(f"the partition book has no entry for node types {missing}")
    books: dict[str, Tensor] = {}
    for t, n in graph.node_counts.items():
        b = torch.as_tensor(np.asarray(book[t], dtype=np.int64))
        if b.shape != (n,):
            raise ValueError(f"the partition book of {t!r} has {tuple(b.shape)} entries, not {n}")
        if n and (int(b.min()) < 0 or int(b.max()) >= num_partitions):
            raise ValueError(
                f"the partition book of {t!r} names partitions outside 0..{num_partitions - 1}"
            )
        books[t] = b
    target = graph.target_node_type
    owner = books[target]

    def split(mask: npt.NDArray[np.bool_]) -> list[Tensor]:
        return _by_partition(np.flatnonzero(mask), owner, num_partitions)

    return HeteroTrainingData(
        node_counts=dict(graph.node_counts),
        in_csr={
            et: (
                torch.as_tensor(np.asarray(indptr, dtype=np.int64)),
                torch.as_tensor(np.asarray(indices, dtype=np.int64)),
            )
            for et, (indptr, indices) in graph.in_csr.items()
        },
        x={
            t: torch.as_tensor(np.ascontiguousarray(v, dtype=np.float32))
            for t, v in graph.x.items()
        },
        y=torch.as_tensor(np.asarray(graph.y, dtype=np.int64)),
        target_node_type=target,
        num_classes=graph.num_classes,
        train_ids=split(graph.train_mask),
        val_ids=split(graph.val_mask),
        test_ids=split(graph.test_mask),
        book=books,
    )


def contiguous_book(node_counts: Mapping[str, int], num_partitions: int) -> dict[str, Tensor]:
    """Every type's ids cut into ``num_partitions`` contiguous blocks (tests, one trainer)."""
    return {
        t: torch.arange(n, dtype=torch.int64) * num_partitions // max(n, 1)
        for t, n in node_counts.items()
    }


def _ids(values: npt.ArrayLike) -> Tensor:
    return torch.from_numpy(np.array(values, dtype=np.int64))


def from_store(
    store: HeteroPartitionStore, *, graph: bool = True, features: bool = True
) -> HeteroTrainingData:
    """The typed store's graph as a worker-mode trainer or a sampler server reads it.

    ``graph=False`` is a server-client trainer's view: no topology and no feature rows (the
    sampler servers sample and gather them), only every edge type with an empty CSR, every
    featured type with its width and no rows, the labels, the splits and the book.
    ``features=False`` keeps the topology but reads no feature rows either (a worker-mode
    trainer whose rows come from its partition, its hot cache and their owners).
    """
    rows_too = graph and features
    m = store.meta
    parts = [store.partition(p) for p in range(store.num_partitions)]
    x = {
        t: torch.zeros(
            (m.node_counts[t] if rows_too else 0, m.num_features[t]), dtype=torch.float32
        )
        for t in m.node_types
        if m.num_features[t] > 0
    }
    target = m.target_node_type
    y = torch.full((m.node_counts[target],), -1, dtype=torch.int64)
    for part in parts:
        for t, rows in x.items() if rows_too else ():
            rows[_ids(part.nodes[t])] = torch.from_numpy(np.array(part.x[t], dtype=np.float32))
        y[_ids(part.nodes[target])] = torch.from_numpy(np.array(part.y, dtype=np.int64))
    empty = torch.zeros(0, dtype=torch.int64)
    return HeteroTrainingData(
        node_counts=dict(m.node_counts),
        in_csr={
            et: (_ids(indptr), _ids(indices)) if graph else (empty, empty)
            for et, (indptr, indices) in parts[0].in_csr.items()
        },
        x=x,
        y=y,
        target_node_type=target,
        num_classes=m.num_classes,
        train_ids=[_ids(p.split_ids("train")) for p in parts],
        val_ids=[_ids(p.split_ids("val")) for p in parts],
        test_ids=[_ids(p.split_ids("test")) for p in parts],
        book={t: _ids(store.owner(t)) for t in m.node_types},
    )


def check_store(store: PartitionStore, spec: DistGNNJobSpec, num_holders: int) -> None:
    """The partition store must match the job: a clear error otherwise."""
    parts = store.meta.num_partitions
    if parts % num_holders:
        raise BadInputError(
            f"partition store {store.path} has {parts} partitions, not a multiple of the "
            f"{num_holders} holders; set partition.numPartitions to a multiple of "
            "samplers.replicas (trainers.replicas in worker mode)"
        )
    if store.meta.num_nodes < 1 or (store.meta.num_classes < 2 and not spec.is_link_prediction):
        raise BadInputError(f"partition store {store.path} holds no usable graph")


def open_typed_store(path: Path, num_holders: int, *, worker_mode: bool) -> HeteroPartitionStore:
    """The typed store of a job whose ``num_holders`` holders each serve one partition:
    the trainer pods in worker mode, the sampler servers in server-client mode."""
    try:
        store = HeteroPartitionStore.open(path)
    except StoreError as err:
        raise BadInputError(str(err)) from None
    if store.num_partitions != num_holders:
        holders = (
            "trainer pods; in worker mode spec.partition.numPartitions must equal "
            "spec.trainers.replicas"
            if worker_mode
            else "sampler servers; in server-client mode spec.partition.numPartitions must "
            "equal spec.samplers.replicas"
        )
        raise BadInputError(
            f"the typed store at {path} has {store.num_partitions} partitions but the job has "
            f"{num_holders} {holders}"
        )
    return store
