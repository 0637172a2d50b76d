"""A typed mini-batch on the wire, from a sampler server to a trainer (server-client mode).

The typed counterpart of :data:`~distgnn_workload.runtime.batches.WireBatch`: a plain tuple
of dicts of tensors, ints and lists, as torch RPC carries them (tensors out of band)::

    (seed_type, num_seeds,
     node_ids        {node type: int64 global ids},
     nodes_per_hop   {node type: [L + 1 ints]},
     edge_index      {edge type: int32 [2, E]  (int64 when a type has >= 2^31 nodes)},
     edges_per_hop   {edge type: [L ints]},
     target_ptr      {edge type: int64 CSR offsets},
     x               {featured node type: rows of node_ids[t], in node_ids order},
     y               int64 labels of the seeds)

Only the featured types' rows travel: the rows of featureless types are learnt embeddings
that stay with the trainers (:mod:`distgnn_workload.embeddings`), which look them up by the
node ids of the batch. Batches travel as RPC tensors (on the device with CUDA RPC, else on
the host); there is no shared-slot path for typed batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.sampling.hetero_hop_batch import HeteroHopBatch

HeteroWireBatch = tuple[Any, ...]
"""(seed_type, num_seeds, node_ids, nodes_per_hop, edge_index, edges_per_hop, target_ptr,
x, y): see the module docstring."""

_INT32_MAX = 2**31 - 1


def pack_hetero(
    hop: HeteroHopBatch,
    x: dict[str, Tensor],
    y: Tensor,
    wire: Callable[[Tensor], Tensor],
) -> HeteroWireBatch:
    """A typed mini-batch as it travels from a sampler server to a trainer."""
    narrow = all(n <= _INT32_MAX for n in hop.num_nodes.values())
    return (
        hop.seed_type,
        hop.num_seeds,
        {t: wire(v) for t, v in hop.node_ids.items()},
        {t: list(n) for t, n in hop.num_nodes_per_hop.items()},
        {et: wire(v.to(torch.int32) if narrow else v) for et, v in hop.edge_index.items()},
        {et: list(n) for et, n in hop.num_edges_per_hop.items()},
        {et: wire(v) for et, v in hop.target_ptr.items()},
        {t: wire(v) for t, v in x.items()},
        wire(y),
    )


def unpack_hetero(
    batch: HeteroWireBatch, device: torch.device
) -> tuple[HeteroHopBatch, dict[str, Tensor], Tensor]:
    """The typed mini-batch a sampler server sent, on ``device``: (hop, x, y)."""
    seed_type, num_seeds, node_ids, nodes, edge_index, edges, target_ptr, x, y = batch

    def to(t: Tensor) -> Tensor:
        if device.type == "cuda" and t.device.type == "cpu":
            t = t.pin_memory()
        return t.to(device, non_blocking=True)

    hop = HeteroHopBatch(
        seed_type=str(seed_type),
        num_seeds=int(num_seeds),
        node_ids={t: to(v) for t, v in node_ids.items()},
        num_nodes_per_hop={t: [int(k) for k in n] for t, n in nodes.items()},
        edge_index={et: to(v).to(torch.int64) for et, v in edge_index.items()},
        num_edges_per_hop={et: [int(k) for k in n] for et, n in edges.items()},
        target_ptr={et: to(v) for et, v in target_ptr.items()},
    )
    return hop, {t: to(v) for t, v in x.items()}, to(y)


def hetero_wire_bytes(batch: HeteroWireBatch) -> int:
    """Tensor bytes of a typed wire batch (what the bytes-sent counter counts)."""
    total = 0
    for part in batch:
        tensors = part.values() if isinstance(part, dict) else (part,)
        total += sum(t.numel() * t.element_size() for t in tensors if isinstance(t, Tensor))
    return total


def feature_bytes(batch: HeteroWireBatch) -> int:
    """Bytes of the featured types' rows in a typed wire batch."""
    return sum(t.numel() * t.element_size() for t in batch[7].values())
