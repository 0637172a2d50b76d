"""What full-neighbourhood evaluation holds in a trainer process, after training: the
largest layer of :class:`~distgnn_workload.evaluation.inference.LayerwiseInference` at once,
and the store's pages it reads. Used by :mod:`distgnn_api.capacity`.
"""

from __future__ import annotations

import math

from distgnn_api.graph_size import GraphSize
from distgnn_api.pod_memory import Item, Shapes, Where, layer_widths
from distgnn_api.spec import DistGNNJobSpec

# workload/evaluation/blocks.py DEFAULT_CHUNK_EDGES, DEFAULT_CHUNK_NODES
EVAL_CHUNK_EDGES = 1 << 21
EVAL_CHUNK_NODES = 1 << 16


def evaluation_items(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where, world: int
) -> list[Item]:
    """Full-neighbourhood evaluation (evaluation.test or .validation full), after training:
    evaluation/inference.py LayerwiseInference, the largest layer at once."""
    ev = spec.training.evaluation
    if "full" not in (ev.test.value, ev.validation.value):
        return []
    n = graph.num_nodes
    ab = 2 if spec.training.bf16 else 4
    chunk_nodes = min(n, EVAL_CHUNK_NODES)
    chunk_edges = min(graph.num_edges, EVAL_CHUNK_EDGES)
    block_nodes = min(n, chunk_edges + chunk_nodes)
    # on a GPU the caching allocator keeps a second chunk's source rows: each chunk's int64
    # index arrays (over 1 MiB: the large pool) are carved out of the block the previous
    # chunk's rows freed, so the next chunk's rows (a different size) take a new segment
    chunk_inputs = 2 if dev == "gpu" else 1
    peak = 0
    for i, o in layer_widths(spec, graph):
        peak = max(
            peak,
            n * i * ab  # every node's rows of the layer below, all-gathered
            + chunk_inputs * block_nodes * i * ab  # a chunk's source rows
            + math.ceil(n / world) * o * ab  # this rank's share of the output
            + 2 * chunk_nodes * o * ab  # the chunk's aggregate and output
            + 2 * chunk_edges * 8,  # the chunk's block (int64 sources, local ids)
        )
    peak += n * 8  # every node's in-degree, int64 on the device (blocks.in_degrees)
    # file pages (reclaimable, but counted in RSS): the topology, this rank's feature rows;
    # mapped while the layers run, so on top of the largest one
    share = math.ceil(n / world)
    store_pages = (n + 1) * 8 + graph.num_edges * graph.index_bytes + share * graph.num_features * 4
    store_host = store_pages + n * 16
    if dev == "host":
        return [
            Item("full-neighbourhood evaluation (largest layer, and the topology, features and "
                 "labels it reads from the store)", peak + store_host, dev,
                 "evaluation/inference.py LayerwiseInference, store_rows.py (mmap)",
                 transient=True),
        ]  # fmt: skip
    return [
        Item("full-neighbourhood evaluation (largest layer)", peak, dev,
             "evaluation/inference.py LayerwiseInference", transient=True),
        Item("evaluation: topology, features, labels read from the store", store_host,
             "host", "evaluation/store_rows.py, inference.py store.topology() (mmap)",
             transient=True),
    ]  # fmt: skip
