"""Graph partitioning and the on-disk partition store (format version 1).

The partition Job (``python -m distgnn_workload.partitioner``) loads the job's dataset,
assigns every node to a partition (METIS or random) with this package, and writes this store
on the shared volume. Samplers and trainers read it with :class:`PartitionStore`.

Nodes are relabelled: partition p owns the contiguous new ids ``[offsets[p], offsets[p+1])``
(ordered by partition, then by original id). Every stored id is a new id; ``orig_ids.npy``
maps back to the dataset's ids. ``N`` nodes, ``E`` directed edges (each undirected edge
twice), ``F`` features, ``n_p`` nodes in partition p; ``idx`` is int32 when N < 2^31,
else int64. Every array is a ``.npy`` file that ``numpy.load(mmap_mode="r")`` opens::

    <data>/partitions/<key>/
    ├── META.json              format_version, graph stats, offsets, per-partition stats,
    │                          edge cut, balance, dataset and partition specs, step timings,
    │                          the sampling probe (:mod:`.probe`), out_of_core when streamed
    │                          (and out_of_core_assignment: how the nodes were assigned)
    ├── topology/
    │   ├── indptr.npy         int64 [N+1]   the full CSR, rows sorted, no self-loops
    │   └── indices.npy        idx   [E]
    ├── orig_ids.npy           idx   [N]     new id -> dataset id
    ├── new_ids.npy            idx   [N]     dataset id -> new id
    ├── partition_book.npy     int32 [N]     dataset id -> partition
    ├── part-0/
    │   ├── indptr.npy         int64 [n_p+1] CSR of the owned nodes' neighbourhoods
    │   ├── indices.npy        idx   [E_p]   neighbours as global new ids
    │   ├── features.npy       float32 [n_p, F]
    │   ├── labels.npy         int64 [n_p]
    │   ├── train_mask.npy     bool  [n_p]
    │   ├── val_mask.npy       bool  [n_p]
    │   ├── test_mask.npy      bool  [n_p]
    │   └── orig_ids.npy       idx   [n_p]   dataset ids of the owned nodes
    ├── part-1/ ...
    └── _SUCCESS               written last: the store is complete

The node-to-partition book in new ids is ``offsets`` itself
(:meth:`PartitionStore.partition_of`). A store is written in a temporary sibling
directory and published with one rename, so a directory named ``<key>`` is always
complete; readers still check ``_SUCCESS`` and the format version.

A graph larger than the partition pod's memory takes the out-of-core path
(``partition.outOfCore``; :mod:`.ooc_job`): the dataset is streamed in chunks, nodes are
assigned at random or, with ``partition.metisSampleEdges``, by METIS on a sampled subgraph
and streamed passes (:mod:`.ooc_metis`), and :mod:`.ooc_writer` writes the same store
through an external bucket sort (:mod:`.external_sort`).

A heterogeneous graph gets a typed store instead (META.json's ``graph_kind`` is ``hetero``):
:mod:`.hetero_store` draws it; read it with :func:`load_hetero_partition`, write one with
:func:`write_hetero_partitions`.
"""

from distgnn_workload.partition.hetero_store import (
    HeteroPartition,
    HeteroPartitionMeta,
    HeteroPartitionStore,
    is_hetero_store,
    load_hetero_partition,
)
from distgnn_workload.partition.hetero_writer import write_hetero_partitions
from distgnn_workload.partition.store import (
    PartitionData,
    PartitionMeta,
    PartitionStats,
    PartitionStore,
    StoreError,
    is_complete,
)
from distgnn_workload.partition.writer import write_partitions

__all__ = [
    "HeteroPartition",
    "HeteroPartitionMeta",
    "HeteroPartitionStore",
    "PartitionData",
    "PartitionMeta",
    "PartitionStats",
    "PartitionStore",
    "StoreError",
    "is_complete",
    "is_hetero_store",
    "load_hetero_partition",
    "write_hetero_partitions",
    "write_partitions",
]
