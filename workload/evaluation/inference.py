"""Layer-wise full-neighbourhood inference over every node of a typed graph, one share per rank.

Every graph is typed here: a homogeneous store is the case of one node type
(:data:`~distgnn_workload.data.graph.NODE_TYPE`) and one edge type
(:meth:`LayerwiseInference.of_store`). Layer ``l`` is computed for every node of each type
it outputs before layer ``l + 1``, each node from its whole in-neighbourhood over every
edge type into its type (the destination-indexed CSR of each edge type):

- each node type's ids are split into one contiguous share per rank (``shares``; by default
  :func:`~distgnn_workload.evaluation.shares.typed_shares`); rank ``r`` computes its share
  of every type, in chunks of destinations with at most ``chunk_edges`` in-edges over all
  the relations into the type;
- layer 0's inputs are each rank's share of every input type (``inputs``: features read from
  the store, or learnt embeddings' rows, a collective lookup); they and every layer's
  outputs but the last are all-gathered per type over the trainers' process group
  (:func:`~distgnn_workload.evaluation.exchange.exchange`), so a chunk reads any node's row;
- the last layer computes only the target type(s): the logits of the rank's share stay there
  (:meth:`LayerwiseInference.embeddings` gathers them, for link prediction).

A relational model (R-SAGE, R-GCN) runs its ``combine`` over the per-relation means of each
chunk. A homogeneous model (GraphSAGE, GCN, GAT: :class:`LayerwiseModel`) runs its
``inference_layer`` over one :class:`~distgnn_workload.models.layerwise.NeighbourhoodBlock`
of the one edge type per chunk, as fast as before the graph kinds shared this engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.evaluation.blocks import (
    DEFAULT_CHUNK_EDGES,
    DEFAULT_CHUNK_NODES,
    build_block,
    chunk_bounds,
    in_degrees,
)
from distgnn_workload.evaluation.exchange import DEFAULT_EXCHANGE_ROWS, LayerRows, exchange
from distgnn_workload.evaluation.shares import node_shares, typed_shares
from distgnn_workload.evaluation.store_rows import StoreRows
from distgnn_workload.models.aggregation import mean_aggregate
from distgnn_workload.models.layerwise import LayerwiseModel
from distgnn_workload.models.relational import LayerPlan, RelationalGNN
from distgnn_workload.partition.store import PartitionStore

log = logging.getLogger(__name__)

DEVICE_MEMORY_SHARE = 0.5
"""Gathered layer outputs stay on the GPU when they take at most this share of its free
memory; larger ones are kept in host memory and each chunk's rows are copied over."""

TypedCSR = Mapping[EdgeType, tuple[npt.ArrayLike | Tensor, npt.ArrayLike | Tensor]]
"""Per edge type, the destination-indexed CSR ``(indptr, indices)`` of the whole graph."""
TypedInputs = Callable[[str, int, int], Tensor]
"""Layer 0's rows of a node type's ids ``[lo, hi)``; called on every rank for every input
type in the same order (a learnt embedding's lookup is a collective)."""


def _host(values: npt.ArrayLike | Tensor) -> npt.NDArray[Any]:
    if isinstance(values, Tensor):
        return values.cpu().numpy()
    return np.asarray(values)


def plan_of(model: nn.Module) -> LayerPlan:
    """The types each layer of ``model`` reads and writes: a relational model's own plan, or
    one node type and one edge type for a homogeneous model."""
    if isinstance(model, RelationalGNN):
        return model.plan
    if not hasattr(model, "inference_layer"):
        raise TypeError(f"{type(model).__name__} has no inference_layer for layer-wise inference")
    layered: LayerwiseModel = model  # type: ignore[assignment]
    return LayerPlan([NODE_TYPE], [EDGE_TYPE], NODE_TYPE, layered.num_layers)


class LayerwiseInference:
    """Full-neighbourhood inference of a model over every node, one share of each type per
    rank (see the module docstring)."""

    def __init__(
        self,
        in_csr: TypedCSR,
        node_counts: Mapping[str, int],
        inputs: TypedInputs,
        *,
        shares: Mapping[str, Sequence[tuple[int, int]]] | None = None,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
        bf16: bool = False,
        group: dist.ProcessGroup | None = None,
        chunk_edges: int = DEFAULT_CHUNK_EDGES,
        chunk_nodes: int = DEFAULT_CHUNK_NODES,
        exchange_rows: int = DEFAULT_EXCHANGE_ROWS,
        on_host: bool | None = None,
    ) -> None:
        """``shares`` (per node type, each rank's ``[lo, hi)``) default to an even split;
        ``on_host`` None keeps a gathered layer on the GPU while it takes at most
        :data:`DEVICE_MEMORY_SHARE` of the free memory."""
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
        self.on_host = on_host
        given = shares or {}
        self.shares = {
            t: list(given.get(t) or typed_shares(n, world_size))
            for t, n in self.node_counts.items()
        }
        self._chunks: dict[tuple[str, tuple[EdgeType, ...]], list[tuple[int, int]]] = {}
        self._degrees: dict[EdgeType, Tensor] = {}

    @classmethod
    def of_store(
        cls,
        store: PartitionStore,
        *,
        rows: StoreRows | None = None,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
        bf16: bool = False,
        **options: Any,
    ) -> LayerwiseInference:
        """The inference of a homogeneous store, the one-type case: its topology and each
        rank's share of the features read from the store's memory maps, shares of whole
        partitions where the ranks divide them (:func:`node_shares`). ``rows``: the store's
        rows, if already open."""
        held = rows or StoreRows(store)
        device = device or torch.device("cpu")
        # the features enter as the training steps take them: bf16 under bf16 training
        dtype = torch.bfloat16 if bf16 and device.type == "cuda" else torch.float32

        def features(node_type: str, lo: int, hi: int) -> Tensor:
            return torch.from_numpy(held.feature_range(lo, hi)).to(device, dtype=dtype)

        return cls(
            {EDGE_TYPE: store.topology()},
            {NODE_TYPE: store.meta.num_nodes},
            features,
            shares={NODE_TYPE: node_shares([int(o) for o in store.offsets], world_size)},
            rank=rank,
            world_size=world_size,
            device=device,
            bf16=bf16,
            **options,
        )

    def share(self, node_type: str) -> tuple[int, int]:
        """The ids ``[lo, hi)`` of ``node_type`` whose rows this rank computes."""
        return self.shares[node_type][self.rank]

    def chunks(self, node_type: str, relations: Sequence[EdgeType]) -> list[tuple[int, int]]:
        """This rank's share of ``node_type`` cut by in-edges over ``relations`` (cached)."""
        key = (node_type, tuple(relations))
        if key not in self._chunks:
            lo, hi = self.share(node_type)
            if len(relations) == 1:
                total = self.csr[relations[0]][0]
            else:
                total = np.zeros(self.node_counts[node_type] + 1, dtype=np.int64)
                for et in relations:
                    total += self.csr[et][0]
            # an empty share runs one empty chunk: its output has no rows but the layer's width
            bounds = chunk_bounds(total, lo, hi, self.chunk_edges, self.chunk_nodes)
            self._chunks[key] = bounds or [(lo, lo)]
        return self._chunks[key]

    @torch.no_grad()
    def logits(self, model: nn.Module) -> Tensor:
        """Float32 logits of this rank's share of the (first) target type; every rank must
        call."""
        return self._last_layer(model)[plan_of(model).target_node_type].float()

    @torch.no_grad()
    def embeddings(self, model: nn.Module) -> dict[str, LayerRows]:
        """The last layer's rows of every target type, all-gathered so that any node's row
        can be read (link prediction ranks pairs of them; every rank must call)."""
        outs = self._last_layer(model)
        return {t: self._gather(t, outs[t].float()) for t in plan_of(model).target_node_types}

    def _autocast(self) -> Any:
        if self.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _keep_on_host(self, node_type: str, width: int, dtype: torch.dtype) -> bool:
        if self.on_host is not None:
            return self.on_host
        if self.device.type != "cuda":
            return False
        size = torch.tensor([], dtype=dtype).element_size()
        need = self.node_counts[node_type] * width * size
        free, _ = torch.cuda.mem_get_info(self.device)
        # blocks the caching allocator holds but no tensor uses are free to this process
        free += torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        return need > DEVICE_MEMORY_SHARE * free

    def _gather(self, node_type: str, local: Tensor) -> LayerRows:
        return exchange(
            local,
            self.shares[node_type],
            self.rank,
            group=self.group,
            on_host=self._keep_on_host(node_type, local.size(1), local.dtype),
            chunk_rows=self.exchange_rows,
        )

    def _last_layer(self, model: nn.Module) -> dict[str, Tensor]:
        """This rank's share of the last layer's rows of every type it computes."""
        plan = plan_of(model)
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
                outs = {
                    t: self._layer(model, layer, t, plan.relations_into(layer, t), prev)
                    for t in plan.dst_types[layer]
                }
                if layer == last:
                    return outs
                prev = {}  # free the layer below before gathering this one
                for t in list(outs):
                    prev[t] = self._gather(t, outs.pop(t))
            raise AssertionError("a model has at least one layer")
        finally:
            model.train(was_training)

    def _layer(
        self,
        model: nn.Module,
        layer: int,
        node_type: str,
        relations: list[EdgeType],
        prev: Mapping[str, LayerRows],
    ) -> Tensor:
        lo, hi = self.share(node_type)
        out: Tensor | None = None
        for a, b in self.chunks(node_type, relations):
            if isinstance(model, RelationalGNN):
                h = self._relational(model, layer, node_type, relations, a, b, prev)
            else:  # one node type, one edge type: the model reads the chunk's block
                h = self._one_type(model, layer, relations[0], a, b, prev[node_type])
            if out is None:
                out = torch.empty((hi - lo, h.size(1)), dtype=h.dtype, device=self.device)
            out[a - lo : b - lo] = h
        assert out is not None, "every share has at least one chunk"
        return out

    def _one_type(
        self, model: nn.Module, layer: int, edge_type: EdgeType, a: int, b: int, rows: LayerRows
    ) -> Tensor:
        indptr, indices = self.csr[edge_type]
        if edge_type not in self._degrees:
            self._degrees[edge_type] = in_degrees(indptr, self.device)
        block = build_block(indptr, indices, a, b, self._degrees[edge_type], self.device)
        x = rows.rows(block.nodes)
        layered: LayerwiseModel = model  # type: ignore[assignment]
        with self._autocast():
            return layered.inference_layer(layer, x, block)

    def _relational(
        self,
        model: RelationalGNN,
        layer: int,
        node_type: str,
        relations: list[EdgeType],
        a: int,
        b: int,
        prev: Mapping[str, LayerRows],
    ) -> Tensor:
        ids = torch.arange(a, b, dtype=torch.int64, device=self.device)
        x_dst = prev[node_type].rows(ids)
        aggs = [self._mean(et, a, b, prev[et[0]]) for et in relations]
        with self._autocast():
            h = model.combine(layer, {node_type: x_dst}, {node_type: aggs})[node_type]
            if layer < model.num_layers - 1:
                h = F.relu(h)
        return h

    def _mean(self, edge_type: EdgeType, a: int, b: int, rows: LayerRows) -> Tensor:
        """The mean of the inputs of the in-neighbours of type ``edge_type[0]`` of the
        destinations ``[a, b)`` (zeros where a node has none, as PyG's mean gives)."""
        indptr, indices = self.csr[edge_type]
        start, end = int(indptr[a]), int(indptr[b])
        src = torch.from_numpy(np.array(indices[start:end], dtype=np.int64)).to(self.device)
        ptr = torch.from_numpy(np.asarray(indptr[a : b + 1], dtype=np.int64) - start)
        unique, local = torch.unique(src, return_inverse=True)
        return mean_aggregate(rows.rows(unique), local, ptr.to(self.device))
