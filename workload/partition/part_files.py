"""The node files every store writer writes alike: the relabelling maps at the store's root,
and each part's labels and split masks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from distgnn_workload.partition.meta import (
    LABELS_FILE,
    MASK_FILES,
    NEW_IDS_FILE,
    ORIG_IDS_FILE,
    PARTITION_BOOK_FILE,
    PartitionStats,
)
from distgnn_workload.partition.npy_append import save_array
from distgnn_workload.partition.relabel import SplitMasks


class Labelled(SplitMasks, Protocol):
    """A graph's labels and split masks (of its target type, on a heterogeneous graph)."""

    @property
    def y(self) -> npt.NDArray[np.int64]: ...


def save_id_maps(
    root: Path,
    old_of_new: npt.NDArray[Any],
    new_of_old: npt.NDArray[Any],
    assignment: npt.NDArray[Any],
) -> None:
    """The original id of each new id, the new id of each original, and each node's part."""
    save_array(root / ORIG_IDS_FILE, old_of_new)
    save_array(root / NEW_IDS_FILE, new_of_old)
    save_array(root / PARTITION_BOOK_FILE, assignment)


def save_part_nodes(
    pdir: Path,
    p: int,
    start: int,
    graph: Labelled,
    olds: npt.NDArray[Any],
    *,
    num_edges: int,
    num_cut_edges: int,
    num_halo_nodes: int,
) -> PartitionStats:
    """Save the labels, split masks and original ids of part ``p``, whose nodes ``olds`` hold
    new ids from ``start``; return its figures."""
    save_labels(pdir, graph, olds)
    save_array(pdir / ORIG_IDS_FILE, olds)
    return PartitionStats(
        id=p,
        start=start,
        end=start + len(olds),
        num_nodes=len(olds),
        num_edges=num_edges,
        num_train=int(np.count_nonzero(graph.train_mask[olds])),
        num_val=int(np.count_nonzero(graph.val_mask[olds])),
        num_test=int(np.count_nonzero(graph.test_mask[olds])),
        num_cut_edges=num_cut_edges,
        num_halo_nodes=num_halo_nodes,
    )


def save_labels(pdir: Path, graph: Labelled, rows: npt.NDArray[Any]) -> None:
    """The labels and split masks of the nodes ``rows`` (original ids) into part folder ``pdir``."""
    save_array(pdir / LABELS_FILE, graph.y[rows])
    for split, file in MASK_FILES.items():
        save_array(pdir / file, getattr(graph, f"{split}_mask")[rows])
