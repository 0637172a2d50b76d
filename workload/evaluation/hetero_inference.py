"""Layer-wise full-neighbourhood inference of a relational model over every typed node.

The typed form of :class:`~distgnn_workload.evaluation.inference.LayerwiseInference`:
layer ``l`` of an R-SAGE or R-GCN is computed for every node of each type it outputs
(the plan's ``dst_types[l]``) before layer ``l + 1``, each node from its whole
in-neighbourhood of every edge type into its type (the typed store's CSR per edge type).

- Each node type's ids are split evenly over the ranks (:func:`typed_shares`); rank ``r``
  computes its share of every type, in chunks of destinations with at most ``chunk_edges``
  in-edges over all the relations into the type.
- Layer 0's inputs are each rank's share of every input type (``inputs``: features read
  from the store, or the learnt embeddings' rows, a collective lookup); they and every
  layer's outputs but the last are all-gathered per type over the trainers' process group
  (:func:`~distgnn_workload.evaluation.exchange.exchange`), so a chunk reads any node's row.
- The last layer computes only the target type(s): the logits of the rank's share stay there
  (:meth:`HeteroLayerwiseInference.embeddings` gathers a link model's two ends).

Memory per rank: per node type ``t``, the gathered rows of the layer below
(``N_t x width x b``), plus one chunk's neighbour rows; the topology is read from
memory-mapped files chunk by chunk.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.evaluation.blocks import (
    DEFAULT_CHUNK_EDGES,
    DEFAULT_CHUNK_NODES,
    chunk_bounds,
)
from distgnn_workload.evaluation.exchange import DEFAULT_EXCHANGE_ROWS, LayerRows, exchange
from distgnn_workload.models.aggregation import mean_aggregate
from distgnn_workload.models.relational import RelationalGNN

TypedCSR = Mapping[EdgeType, tuple[npt.ArrayLike | Tensor, npt.ArrayLike | Tensor]]
"""Per edge type, the destination-indexed CSR ``(indptr, indices)`` of the whole graph."""
TypedInputs = Callable[[str, int, int], Tensor]
"""Layer 0's rows of a node type's ids ``[lo, hi)``; called on every rank for every input
type in the same order (a learnt embedding's lookup is a collective)."""


def typed_shares(num_nodes: int, world_size: int) -> list[tuple[int, int]]:
    """The contiguous id range ``[lo, hi)`` of one node type that each rank computes (an even
    split; a rank's share is empty when the type has fewer nodes than ranks)."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    bounds = [num_nodes * r // world_size for r in range(world_size + 1)]
    return list(itertools.pairwise(bounds))


def _host(values: npt.ArrayLike | Tensor) -> npt.NDArray[Any]:
    if isinstance(values, Tensor):
        return values.cpu().numpy()
    return np.asarray(values)


class HeteroLayerwiseInference:
    """Full-neighbourhood inference of a relational model, one share of each type per rank."""

    def __init__(
        self,
        in_csr: TypedCSR,
        node_counts: Mapping[str, int],
        inputs: TypedInputs,
        *,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
        bf16: bool = False,
        group: dist.ProcessGroup | None = None,
        chunk_edges: int = DEFAULT_CHUNK_EDGES,
        chunk_nodes: int = DEFAULT_CHUNK_NODES,
        exchange_rows: int = DEFAULT_EXCHANGE_ROWS,
    ) -> None:
        self.csr = {
            et: (_host(p).astype(np.int64, copy=False), _host(i)) for et, (p, i) in in_csr.items()
        }
        self.node_counts = dict(node_counts)
        self.inputs = inputs
        self.rank = rank
        self.world_size = world_size
        self.device = device or torch.device("cpu")
        self.bf16 = bf16 and self.device.type == "cuda"
        self.group = group
        self.chunk_edges = chunk_edges
        self.chunk_nodes = chunk_nodes
        self.exchange_rows = exchange_rows
        self.shares = {t: typed_shares(n, world_size) for t, n in self.node_counts.items()}

    def share(self, node_type: str) -> tuple[int, int]:
        """The ids ``[lo, hi)`` of ``node_type`` whose rows this rank computes."""
        return self.shares[node_type][self.rank]

    def _autocast(self) -> Any:
        if self.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _gather(self, node_type: str, local: Tensor) -> LayerRows:
        return exchange(
            local,
            self.shares[node_type],
            self.rank,
            group=self.group,
            chunk_rows=self.exchange_rows,
        )

    @torch.no_grad()
    def logits(self, model: RelationalGNN) -> Tensor:
        """Float32 logits of this rank's share of the target type (every rank must call)."""
        return self._last_layer(model)[model.plan.target_node_type].float()

    @torch.no_grad()
    def embeddings(self, model: RelationalGNN) -> dict[str, LayerRows]:
        """The last layer's rows of every target type, all-gathered so that any node's row
        can be read (link prediction ranks pairs of them; every rank must call)."""
        outs = self._last_layer(model)
        return {t: self._gather(t, outs[t].float()) for t in model.plan.target_node_types}

    def _last_layer(self, model: RelationalGNN) -> dict[str, Tensor]:
        """This rank's share of the last layer's rows of every type it computes."""
        plan = model.plan
        unknown = [et for et in plan.all_edge_types if et not in self.csr]
        if unknown:
            raise ValueError(f"the graph has no topology for edge types {unknown}")
        was_training = model.training
        model.eval()
        try:
            prev: dict[str, LayerRows] = {}
            for t in plan.input_types:  # the same order on every rank
                lo, hi = self.share(t)
                prev[t] = self._gather(t, self.inputs(t, lo, hi).to(self.device))
            last = plan.num_layers - 1
            for layer in range(plan.num_layers):
                outs = {t: self._layer(model, layer, t, prev) for t in plan.dst_types[layer]}
                if layer == last:
                    return outs
                prev = {}  # free the layer below before gathering this one
                for t, out in outs.items():
                    prev[t] = self._gather(t, out)
            raise AssertionError("a model has at least one layer")
        finally:
            model.train(was_training)

    def _chunks(self, relations: list[EdgeType], node_type: str) -> list[tuple[int, int]]:
        """This rank's share of ``node_type`` cut by in-edges over ``relations``."""
        lo, hi = self.share(node_type)
        total = np.zeros(self.node_counts[node_type] + 1, dtype=np.int64)
        for et in relations:
            total += self.csr[et][0]
        # an empty share runs one empty chunk: its output has no rows but the layer's width
        return chunk_bounds(total, lo, hi, self.chunk_edges, self.chunk_nodes) or [(lo, lo)]

    def _layer(
        self, model: RelationalGNN, layer: int, node_type: str, prev: Mapping[str, LayerRows]
    ) -> Tensor:
        relations = model.plan.relations_into(layer, node_type)
        lo, hi = self.share(node_type)
        out: Tensor | None = None
        for a, b in self._chunks(relations, node_type):
            ids = torch.arange(a, b, dtype=torch.int64, device=self.device)
            x_dst = prev[node_type].rows(ids)
            aggs = [self._mean(et, a, b, prev[et[0]]) for et in relations]
            with self._autocast():
                h = model.combine(layer, {node_type: x_dst}, {node_type: aggs})[node_type]
                if layer < model.num_layers - 1:
                    h = F.relu(h)
            if out is None:
                out = torch.empty((hi - lo, h.size(1)), dtype=h.dtype, device=self.device)
            out[a - lo : b - lo] = h
        assert out is not None, "every share has at least one chunk"
        return out

    def _mean(self, edge_type: EdgeType, a: int, b: int, rows: LayerRows) -> Tensor:
        """The mean of the inputs of the in-neighbours of type ``edge_type[0]`` of the
        destinations ``[a, b)`` (zeros where a node has none, as PyG's mean gives)."""
        indptr, indices = self.csr[edge_type]
        start, end = int(indptr[a]), int(indptr[b])
        src = torch.from_numpy(np.array(indices[start:end], dtype=np.int64)).to(self.device)
        ptr = torch.from_numpy(np.asarray(indptr[a : b + 1], dtype=np.int64) - start)
        unique, local = torch.unique(src, return_inverse=True)
        return mean_aggregate(rows.rows(unique), local, ptr.to(self.device))
