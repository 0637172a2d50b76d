"""The partition Job's peak memory, its time, and the store it leaves on the shared volume.

Memory: the whole graph in memory (``data.graph.GraphData``), plus what METIS needs for the
edges it is given (``partition.algorithms``: about 85 bytes per stored edge for the 64-bit
build, at most ``METIS_MAX_EDGES`` of them), plus the writer's id maps. Time: seconds per
stored edge fitted to the measured products-scale runs of ``benchmarks/partition_products.py``
on a 2-core machine (``benchmarks/capacity/results/partition-cpu.json``): 1/100, 1/10 and full
products scale. The store's size is the sum of its ``.npy`` arrays (``partition.writer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from distgnn_api.graph_size import GraphSize
from distgnn_api.spec import DistGNNJobSpec, PartitionAlgorithm

# partition/algorithms.py METIS_MAX_EDGES and its per-edge cost.
METIS_MAX_EDGES = 64_000_000
METIS_BYTES_PER_EDGE = 85
# partition/algorithms.py SECOND_TRY_MAX_EDGES: below it METIS runs twice.
SECOND_TRY_MAX_EDGES = 20_000_000

# Fitted on benchmarks/capacity/results/partition-cpu.json (2-core machine, see the module doc).
PROCESS_BYTES = 100 << 20
"""Interpreter and numpy of the partition process (VmRSS before the graph exists)."""
GENERATE_SECONDS_PER_EDGE = 0.47e-6
"""Synthetic generation (or loading) per stored edge."""
METIS_SECONDS_PER_EDGE = 0.75e-6
"""One METIS run per edge it is given (the 64-bit build, 3 balance constraints)."""
RANDOM_SECONDS_PER_NODE = 0.05e-6
WRITE_SECONDS_PER_EDGE = 0.26e-6
"""The writer's relabel and re-emitted CSR per stored edge (feature rows are a copy)."""
WRITE_SECONDS_PER_FEATURE_BYTE = 0.5e-9

NPY_HEADER = 128  # np.lib.format header (version 2.0) of each .npy file


@dataclass(frozen=True)
class PartitionCost:
    """The partition Job's figures."""

    graph_bytes: int
    metis_bytes: int
    writer_bytes: int
    peak_bytes: int
    seconds: float
    store_bytes: int
    metis_edges: int


def graph_bytes(g: GraphSize) -> int:
    """GraphData.nbytes: int64 indptr, ids, float32 features, int64 labels, three masks."""
    return (
        (g.num_nodes + 1) * 8
        + g.num_edges * g.index_bytes
        + g.num_nodes * (g.num_features * 4 + 8 + 3)
    )


def store_bytes(g: GraphSize, partitions: int) -> int:
    """Every array partition/writer.py writes (META.json aside)."""
    n, e, idx = g.num_nodes, g.num_edges, g.index_bytes
    topology = (n + 1) * 8 + e * idx  # topology/indptr.npy, indices.npy
    maps = 2 * n * idx + n * 4  # orig_ids.npy, new_ids.npy (idx), partition_book.npy (int32)
    per_part = (n + partitions) * 8 + e * idx  # part-*/indptr.npy, indices.npy
    rows = n * g.num_features * 4 + n * 8 + 3 * n + n * idx  # features, labels, masks, orig_ids
    files = 5 + 8 * partitions
    return topology + maps + per_part + rows + files * NPY_HEADER


def partition_cost(spec: DistGNNJobSpec, g: GraphSize) -> PartitionCost:
    """Peak memory and time of the partition Job, and the store it writes."""
    n, e = g.num_nodes, g.num_edges
    metis = spec.partition.algorithm == PartitionAlgorithm.metis
    metis_edges = min(e, METIS_MAX_EDGES) if metis else 0
    gb = graph_bytes(g)
    metis_b = metis_edges * METIS_BYTES_PER_EDGE
    # writer: old_of_new, new_of_old (idx), part_of_new (int32), new_indptr (int64), halo
    writer_b = n * (2 * g.index_bytes + 4 + 8 + 1)
    peak = PROCESS_BYTES + gb + max(metis_b, writer_b)
    runs = 2 if metis and e <= SECOND_TRY_MAX_EDGES else 1
    seconds = (
        e * GENERATE_SECONDS_PER_EDGE
        + (runs * metis_edges * METIS_SECONDS_PER_EDGE if metis else n * RANDOM_SECONDS_PER_NODE)
        + e * WRITE_SECONDS_PER_EDGE
        + n * g.num_features * 4 * WRITE_SECONDS_PER_FEATURE_BYTE
    )
    return PartitionCost(
        graph_bytes=gb,
        metis_bytes=metis_b,
        writer_bytes=writer_b,
        peak_bytes=peak,
        seconds=seconds,
        store_bytes=store_bytes(g, spec.num_partitions),
        metis_edges=metis_edges,
    )
