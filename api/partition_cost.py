"""The partition Job's peak memory, its time, and the store it leaves on the shared volume.

Memory: the whole graph in memory (``data.graph.GraphData``), plus what METIS needs for the
edges it is given (``partition.algorithms``, at most ``METIS_MAX_EDGES`` of them), or the
writer's id maps for a random partition. Time: the partition process's CPU seconds (its wall
time on a core of its own), per step. Both are fitted to measured runs
(``benchmarks/capacity/partition_calibration.py``, results in
``benchmarks/capacity/results/partition-cpu.json``). The store's size is the sum of its
``.npy`` arrays (``partition.writer``), exact to the byte on those runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from distgnn_api.graph_size import GraphSize
from distgnn_api.spec import DistGNNJobSpec, PartitionAlgorithm

# partition/algorithms.py METIS_MAX_EDGES: above it METIS sees a uniform random subgraph.
METIS_MAX_EDGES = 64_000_000
# partition/algorithms.py SECOND_TRY_MAX_EDGES: below it METIS runs twice.
SECOND_TRY_MAX_EDGES = 20_000_000

# Fitted on benchmarks/capacity/results/partition-cpu.json: the products-shaped synthetic graph
# at 1/100, 1/10 and full scale, METIS into 4 parts, on a 2-core machine.
PROCESS_BYTES = 48 << 20
"""VmHWM of the partition process before it builds the graph (interpreter, numpy)."""
METIS_BYTES_PER_EDGE = 97
"""Peak bytes per edge METIS is given, above the graph: measured 96.5 at 1/10, 99.6 at 1/100
(the 64-bit pymetis build, three balance constraints, and the int64 copy of the ids)."""
METIS_SAMPLED_BYTES_PER_EDGE = 138
"""The same above METIS_MAX_EDGES, where the sampled subgraph is built first: 137.7 at full
products scale (64M of 123.7M edges)."""
GENERATE_SECONDS_PER_EDGE = 0.2e-6
"""CPU seconds per stored edge of the synthetic generator (0.19-0.21 measured at all three
scales); loading OGB or PyG files is not calibrated."""
METIS_SECONDS_COEFFICIENT = 2.43e-10
METIS_SECONDS_EXPONENT = 1.45
"""CPU seconds of one METIS run on E edges: a E^b, fitted at 1/10 scale (b from the 1/100 to
1/10 and 1/10 to full ratios, 1.40 and 1.49); rebalancing included."""
RANDOM_SECONDS_PER_NODE = 0.05e-6
WRITE_SECONDS_PER_EDGE = 0.09e-6
"""The writer's relabel and re-emitted CSR, CPU seconds per stored edge."""
WRITE_SECONDS_PER_FEATURE_BYTE = 2e-9

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
    sampled = metis and e > METIS_MAX_EDGES
    metis_b = metis_edges * (METIS_SAMPLED_BYTES_PER_EDGE if sampled else METIS_BYTES_PER_EDGE)
    # writer: old_of_new, new_of_old (idx), part_of_new (int32), new_indptr (int64), halo
    writer_b = n * (2 * g.index_bytes + 4 + 8 + 1)
    peak = PROCESS_BYTES + gb + max(metis_b, writer_b)
    runs = 2 if metis and e <= SECOND_TRY_MAX_EDGES else 1
    seconds = (
        e * GENERATE_SECONDS_PER_EDGE
        + (
            runs * METIS_SECONDS_COEFFICIENT * metis_edges**METIS_SECONDS_EXPONENT
            if metis
            else n * RANDOM_SECONDS_PER_NODE
        )
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
