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

A typed graph gets the typed layout (META.json's ``graph_kind`` is ``hetero``). Its ids are
never relabelled: a node is ``(node_type, i)`` with ``i`` its type-local id in the dataset
(``0 .. n_t - 1``), in the store as in :class:`HeteroGraphData`. Edge types are written
``src__rel__dst`` in paths and META.json (reverse relations included, as the loader added
them). ``F_t`` is the feature width of type t; ``n_{p,t}`` the nodes of type t that
partition p owns; ``idx_t`` is int32 when n_t < 2^31, else int64::

    <data>/partitions/<key>/
    ├── META.json                     graph_kind "hetero", format_version, key, algorithm,
    │                                 node types and counts, per-type id ranges of the
    │                                 homogeneous view, edge types and counts, per-partition
    │                                 per-type counts, edge cut, balance, specs, timings
    ├── owner/<node_type>.npy         int32 [n_t]         partition of each typed node
    ├── topology/<src__rel__dst>/
    │   ├── indptr.npy                int64 [n_dst + 1]   the WHOLE graph's in-CSR (replicated)
    │   └── indices.npy               idx_src [E_et]      source ids, rows sorted, no duplicates
    ├── part-<p>/
    │   ├── nodes/<node_type>.npy     idx_t [n_{p,t}]     owned type-local ids, ascending
    │   ├── features/<node_type>.npy  float32 [n_{p,t}, F_t]  owned rows, in nodes/ order;
    │   │                             only for the types that have features
    │   ├── labels.npy                int64 [n_{p,target}]    target type, in nodes/ order
    │   ├── train_mask.npy            bool  [n_{p,target}]
    │   ├── val_mask.npy              bool  [n_{p,target}]
    │   └── test_mask.npy             bool  [n_{p,target}]
    └── _SUCCESS                      written last: the store is complete

The homogeneous view (what METIS partitions) stacks the types in ``node_types`` order:
typed node ``(t, i)`` is ``type_offsets[t] + i``. Topology is replicated (one copy on the
volume, memory-mapped by every reader); features, labels and splits are split by owner.

Both layouts are written by :func:`write_partitions` (:mod:`.writer`) and read by
:mod:`.store` (:class:`PartitionStore`, :class:`HeteroPartitionStore`); :mod:`.meta` holds
their META.json records and file names. Readers check ``_SUCCESS``, the format version and
the graph kind.
"""

from distgnn_workload.partition.meta import (
    HeteroPartitionMeta,
    PartitionMeta,
    PartitionStats,
    StoreError,
    is_complete,
    is_hetero_store,
)
from distgnn_workload.partition.store import (
    HeteroPartition,
    HeteroPartitionStore,
    PartitionData,
    PartitionStore,
    load_hetero_partition,
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
    "write_partitions",
]
