"""The partition Job's peak memory, its time, and the store it leaves on the shared volume.

Memory: the whole graph in memory (``data.graph.GraphData``), plus what METIS needs for the
edges it is given (``partition.metis``, at most ``METIS_MAX_EDGES`` of them), or the
writer's id maps for a random partition. Time: the partition process's CPU seconds (its wall
time on a core of its own), per step. Both are fitted to measured runs
(``benchmarks/capacity/partition_calibration.py``, results in
``benchmarks/capacity/results/partition-cpu.json``). The store's size is the sum of its
``.npy`` arrays (``partition.writer``), exact to the byte on those runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from distgnn_api.graph_size import GraphSize
from distgnn_api.kube import parse_quantity
from distgnn_api.spec import DistGNNJobSpec, OutOfCore, PartitionAlgorithm

# partition/metis.py METIS_MAX_EDGES: above it METIS sees a uniform random subgraph.
METIS_MAX_EDGES = 64_000_000
# partition/metis.py SECOND_TRY_MAX_EDGES: below it METIS runs twice.
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

# The out-of-core path (partition/ooc_writer.py, external_sort.py), fitted on the two runs of
# benchmarks/capacity/results/out-of-core*.json (12.5M nodes and 320M stored edges, 1.25M and
# 32M; 8 partitions); the 3.75M-node run is the check.
OOC_BUCKET_EDGES = 16 << 20
"""partition/external_sort.py BUCKET_EDGES: directed edges sorted in memory at a time."""
OOC_BYTES_PER_BUCKET_EDGE = 48
"""Peak bytes per edge of the bucket being sorted and split into rows (the pairs read, the
keys, their deduplicated copy, rows and targets)."""
OOC_BYTES_PER_NODE = 54
"""Node-sized arrays held throughout: the assignment and its permutation, both id maps,
degrees, halo flags, labels and masks (and the synthetic generator's stub table)."""
OOC_SECONDS_PER_EDGE = 0.38e-6
"""CPU seconds per stored edge of the out-of-core path: generate or parse, spill, sort, write
(0.38 at 320M edges, 0.28 at 32M)."""

# partition.metisSampleEdges out of core (partition/ooc_metis.py), fitted on
# benchmarks/capacity/results/out-of-core-metis-32m.json (1.25M nodes, 32M stored edges,
# a 4M-edge sample, 8 partitions). Memory: the sample's METIS peaks at the in-memory
# sampled METIS's bytes per edge (METIS_SAMPLED_BYTES_PER_EDGE: 0.63 GiB measured, 0.62
# modelled).
OOC_METIS_PASSES = 5
"""Passes over the edges before the writer's: the sample's, then ooc_metis.ROUNDS."""
OOC_METIS_BYTES_PER_NODE = 40
"""The passes' node-sized arrays: the partition, two draws and their keys, three counts."""
OOC_METIS_CHUNK_BYTES = 96 << 20
"""One chunk of edges in both directions with its masks and draws (data/graph.py EDGE_CHUNK)."""
OOC_METIS_SECONDS_PER_EDGE_PASS = 0.15e-6
"""CPU seconds per stored edge and pass (generate or parse, draw, count): 34.3 s of CPU at
32M edges, 8.9 of them the random path's and about 1 METIS's on the sample."""


def ooc_bucket_edges(num_edges: int, partitions: int) -> int:
    """Edges of one bucket: each partition's share cut into equal buckets of at most
    OOC_BUCKET_EDGES (external_sort.bucket_bounds)."""
    per = num_edges / max(1, partitions)
    return math.ceil(per / max(1, math.ceil(per / OOC_BUCKET_EDGES)))


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
    probe_bytes: int = 0
    """The store's topology pages the sampling probe reads (partition/probe.py, mmap): file
    pages in the job's RSS once it has written the store, beside what it still holds
    (measured at products scale). Counted on the in-memory path only: the out-of-core path
    probes too, but its stores (100M+ nodes) are far larger than the pages 32 batches touch
    in a memory-limited container, where clean file pages are reclaimed; not yet measured."""
    spill_bytes: int = 0
    """Disk of the spilled edge buckets (out of core), beside the store until it is written."""
    out_of_core: bool = False
    """The partition Job streams the graph (partition.outOfCore, or auto and too large)."""
    out_of_core_why: str = ""


def streamable(spec: DistGNNJobSpec) -> bool:
    """Whether the out-of-core path can read the dataset: homogeneous synthetic or ogb."""
    ds = spec.dataset
    return ds.synthetic is not None or (ds.ogb is not None and ds.hetero is None)


def partition_memory_limit(spec: DistGNNJobSpec) -> int | None:
    """The partition container's memory limit (else request) in bytes; None when unset."""
    res = spec.partition.resources
    for values in (res.limits, res.requests):
        if "memory" in values:
            q = parse_quantity(values["memory"])
            if q is not None:
                return int(q)
    return None


def out_of_core(spec: DistGNNJobSpec, g: GraphSize | None) -> tuple[bool, str]:
    """Whether the partition Job takes the out-of-core path, and why, in words.

    ``auto`` streams a homogeneous synthetic or ogb graph when the in-memory partitioner's
    peak exceeds the partition container's memory limit (else its request); it also
    replaces METIS with the random assignment, since METIS needs the whole graph in memory.
    """
    mode = spec.partition.out_of_core
    if mode == OutOfCore.never:
        return False, "partition.outOfCore is never"
    if mode == OutOfCore.always:
        return True, "partition.outOfCore is always"
    if not streamable(spec):
        return False, "only a homogeneous synthetic or ogb dataset can be streamed"
    if g is None:
        return False, "the graph's size is unknown"
    limit = partition_memory_limit(spec)
    if limit is None:
        return False, "partition.resources sets no memory limit or request"
    peak = in_memory_cost(spec, g).peak_bytes
    if peak <= limit:
        return False, (
            f"the in-memory peak ({peak / 2**30:.1f} GiB) fits partition.resources' memory "
            f"({limit / 2**30:.1f} GiB)"
        )
    return True, (
        f"the in-memory peak ({peak / 2**30:.1f} GiB) exceeds partition.resources' memory "
        f"({limit / 2**30:.1f} GiB)"
    )


def ooc_metis_edges(spec: DistGNNJobSpec, g: GraphSize) -> int:
    """Stored edges METIS is given out of core: about partition.metisSampleEdges (the graph's
    own when smaller); 0 for a random assignment."""
    p = spec.partition
    if p.algorithm != PartitionAlgorithm.metis or p.metis_sample_edges <= 0:
        return 0
    return min(p.metis_sample_edges, g.num_edges)


def out_of_core_cost(spec: DistGNNJobSpec, g: GraphSize) -> PartitionCost:
    """Peak memory and time of the out-of-core path: random assignment, or METIS on a
    sampled subgraph (partition.metisSampleEdges) and the streamed passes after it."""
    n, e = g.num_nodes, g.num_edges
    nodes_b = n * OOC_BYTES_PER_NODE
    bucket_b = ooc_bucket_edges(e, spec.num_partitions) * OOC_BYTES_PER_BUCKET_EDGE
    metis_edges = ooc_metis_edges(spec, g)
    if metis_edges:
        metis_b = max(
            metis_edges * METIS_SAMPLED_BYTES_PER_EDGE,
            n * OOC_METIS_BYTES_PER_NODE + OOC_METIS_CHUNK_BYTES,
        )
        assign_s = (
            OOC_METIS_PASSES * e * OOC_METIS_SECONDS_PER_EDGE_PASS
            + METIS_SECONDS_COEFFICIENT * metis_edges**METIS_SECONDS_EXPONENT
        )
    else:
        metis_b = 0
        assign_s = n * RANDOM_SECONDS_PER_NODE
    return PartitionCost(
        graph_bytes=nodes_b,
        metis_bytes=metis_b,
        writer_bytes=bucket_b,
        peak_bytes=PROCESS_BYTES + nodes_b + max(bucket_b, metis_b),
        seconds=e * OOC_SECONDS_PER_EDGE
        + assign_s
        + n * g.num_features * 4 * WRITE_SECONDS_PER_FEATURE_BYTE,
        store_bytes=store_bytes(g, spec.num_partitions),
        metis_edges=metis_edges,
        spill_bytes=e * 2 * g.index_bytes,
        out_of_core=True,
    )


def graph_bytes(g: GraphSize) -> int:
    """GraphData.nbytes: int64 indptr, ids, float32 features, int64 labels, three masks."""
    return (
        (g.num_nodes + 1) * 8
        + g.num_edges * g.index_bytes
        + g.num_nodes * (g.num_features * 4 + 8 + 3)
    )


def probe_bytes(g: GraphSize) -> int:
    """The store's topology (int64 indptr, ids): the sampling probe's draws touch its pages
    all over (partition/probe.py store.topology())."""
    return (g.num_nodes + 1) * 8 + g.num_edges * g.index_bytes


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
    """Peak memory and time of the partition Job, and the store it writes, on the path
    :func:`out_of_core` selects."""
    ooc, why = out_of_core(spec, g)
    cost = out_of_core_cost(spec, g) if ooc else in_memory_cost(spec, g)
    return replace(cost, out_of_core_why=why)


def in_memory_cost(spec: DistGNNJobSpec, g: GraphSize) -> PartitionCost:
    """Peak memory and time of the in-memory partitioner."""
    n, e = g.num_nodes, g.num_edges
    metis = spec.partition.algorithm == PartitionAlgorithm.metis
    metis_edges = min(e, METIS_MAX_EDGES) if metis else 0
    gb = graph_bytes(g)
    sampled = metis and e > METIS_MAX_EDGES
    metis_b = metis_edges * (METIS_SAMPLED_BYTES_PER_EDGE if sampled else METIS_BYTES_PER_EDGE)
    # writer: old_of_new, new_of_old (idx), part_of_new (int32), new_indptr (int64), halo
    writer_b = n * (2 * g.index_bytes + 4 + 8 + 1)
    peak = PROCESS_BYTES + gb + max(metis_b, writer_b, probe_bytes(g))
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
        probe_bytes=probe_bytes(g),
        seconds=seconds,
        store_bytes=store_bytes(g, spec.num_partitions),
        metis_edges=metis_edges,
    )
