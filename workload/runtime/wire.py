"""The wire format of mini-batches between sampler servers and trainers.

On the wire a mini-batch is a plain tuple of tensors and ints (:func:`pack`), sampled
edges as int32 to halve their bytes. A typed mini-batch (:func:`pack_typed`) is a plain
tuple of dicts of tensors, ints and lists, as torch RPC carries them (tensors out of band)::

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
node ids of the batch. Typed batches travel as RPC tensors (on the device with CUDA RPC,
else on the host); there is no shared-slot path for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.loader import MiniBatch
from distgnn_workload.pinned_copies import to_device
from distgnn_workload.runtime.shared_slots import SlotSpec, take
from distgnn_workload.sampling import HopBatch, StaticLayout
from distgnn_workload.sampling.hop_batch import HeteroHopBatch

WireBatch = tuple[Any, ...]
"""(node_ids, edge_index int32, target_ptr, x, y, num_seeds, nodes per hop, edges per hop)."""
TypedWireBatch = tuple[Any, ...]
"""(seed_type, num_seeds, node_ids, nodes_per_hop, edge_index, edges_per_hop, target_ptr,
x, y): see the module docstring."""

_INT32_MAX = 2**31 - 1


def pack(hop: HopBatch, x: Tensor, y: Tensor, wire: Callable[[Tensor], Tensor]) -> WireBatch:
    """A mini-batch as it travels from a sampler server to a trainer."""
    edge_index = hop.edge_index
    if hop.num_nodes <= _INT32_MAX:
        edge_index = edge_index.to(torch.int32)
    return (
        wire(hop.node_ids),
        wire(edge_index),
        wire(hop.get_target_ptr()),
        wire(x),
        wire(y),
        hop.num_seeds,
        list(hop.num_nodes_per_hop),
        list(hop.num_edges_per_hop),
    )


def unpack(batch: WireBatch, device: torch.device) -> MiniBatch:
    """The mini-batch a sampler server sent, on ``device``."""
    node_ids, edge_index, target_ptr, x, y, num_seeds, nodes, edges = batch

    def to(t: Tensor) -> Tensor:
        return to_device(t, device)

    hop = HopBatch(
        node_ids=to(node_ids),
        num_seeds=int(num_seeds),
        num_nodes_per_hop=[int(n) for n in nodes],
        num_edges_per_hop=[int(n) for n in edges],
        edge_index=to(edge_index).to(torch.int64),
        target_ptr=to(target_ptr),
    )
    return MiniBatch(hop=hop, x=to(x), y=to(y))


WireMeta = tuple[int, list[int], list[int]]
"""A mini-batch written into a shared slot: (num_seeds, nodes per hop, edges per hop)."""


def batch_slot_spec(layout: StaticLayout, num_features: int, dtype: torch.dtype) -> SlotSpec:
    """The shared slot a sampler server writes one mini-batch of ``layout`` into."""
    caps = layout.hop_caps
    return {
        "node_ids": ((layout.node_cap,), torch.int64),
        "edges": ((2, sum(caps[1:])), torch.int32),
        "ptr": ((sum(caps[:-1]) + 1,), torch.int64),
        "x": ((layout.node_cap, num_features), dtype),
        "y": ((layout.batch_size,), torch.int64),
    }


def pack_into(hop: HopBatch, x: Tensor, y: Tensor, buffers: dict[str, Tensor]) -> WireMeta:
    """Write a mini-batch into a shared slot; returns what the consumer needs to read it."""
    nodes, edges = hop.num_nodes, hop.num_edges
    ptr = hop.get_target_ptr()
    if nodes > buffers["node_ids"].numel() or edges > buffers["edges"].size(1):
        raise ValueError(f"a batch of {nodes} nodes and {edges} edges exceeds its slot")
    buffers["node_ids"][:nodes].copy_(hop.node_ids)
    buffers["edges"][:, :edges].copy_(hop.edge_index)
    buffers["ptr"][: ptr.numel()].copy_(ptr)
    buffers["x"][:nodes].copy_(x)
    buffers["y"][: y.numel()].copy_(y)
    return hop.num_seeds, list(hop.num_nodes_per_hop), list(hop.num_edges_per_hop)


def unpack_from(meta: WireMeta, buffers: dict[str, Tensor], device: torch.device) -> MiniBatch:
    """Copy a mini-batch out of a shared slot into tensors of this process on ``device``."""
    num_seeds, nodes_per_hop, edges_per_hop = meta
    nodes, edges = sum(nodes_per_hop), sum(edges_per_hop)
    targets = sum(nodes_per_hop[:-1])
    hop = HopBatch(
        node_ids=take(buffers["node_ids"][:nodes], device),
        num_seeds=int(num_seeds),
        num_nodes_per_hop=[int(n) for n in nodes_per_hop],
        num_edges_per_hop=[int(n) for n in edges_per_hop],
        edge_index=take(buffers["edges"][:, :edges], device).to(torch.int64),
        target_ptr=take(buffers["ptr"][: targets + 1], device),
    )
    return MiniBatch(
        hop=hop,
        x=take(buffers["x"][:nodes], device),
        y=take(buffers["y"][:num_seeds], device),
    )


def pack_typed(
    hop: HeteroHopBatch, x: dict[str, Tensor], y: Tensor, wire: Callable[[Tensor], Tensor]
) -> TypedWireBatch:
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


def unpack_typed(
    batch: TypedWireBatch, device: torch.device
) -> tuple[HeteroHopBatch, dict[str, Tensor], Tensor]:
    """The typed mini-batch a sampler server sent, on ``device``: (hop, x, y)."""
    seed_type, num_seeds, node_ids, nodes, edge_index, edges, target_ptr, x, y = batch

    def to(t: Tensor) -> Tensor:
        return to_device(t, device)

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


def wire_bytes(batch: WireBatch | TypedWireBatch) -> int:
    """Tensor bytes of a wire batch of either kind (what the bytes-sent counter counts)."""
    total = 0
    for part in batch:
        tensors = part.values() if isinstance(part, dict) else (part,)
        total += sum(t.numel() * t.element_size() for t in tensors if isinstance(t, Tensor))
    return total


def feature_bytes(batch: TypedWireBatch) -> int:
    """Bytes of the featured types' rows in a typed wire batch."""
    return sum(t.numel() * t.element_size() for t in batch[7].values())
