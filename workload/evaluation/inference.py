"""Layer-wise full-neighbourhood inference over the partition store, one share per rank."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from distgnn_workload.evaluation.blocks import (
    DEFAULT_CHUNK_EDGES,
    DEFAULT_CHUNK_NODES,
    build_block,
    chunk_bounds,
    in_degrees,
)
from distgnn_workload.evaluation.exchange import DEFAULT_EXCHANGE_ROWS, LayerRows, exchange
from distgnn_workload.evaluation.shares import node_shares
from distgnn_workload.evaluation.store_rows import StoreRows
from distgnn_workload.models.layerwise import LayerwiseModel
from distgnn_workload.partition.store import PartitionStore

log = logging.getLogger(__name__)

DEVICE_MEMORY_SHARE = 0.5
"""Gathered layer outputs stay on the GPU when they take at most this share of its free
memory; larger ones are kept in host memory and each chunk's rows are copied over."""


class LayerwiseInference:
    """Full-neighbourhood inference of a model over every node of a store, layer by layer.

    Rank ``r`` of ``world_size`` computes each layer for its share of the nodes
    (:func:`~distgnn_workload.evaluation.shares.node_shares`), chunk by chunk of
    destinations with their whole in-neighbourhoods. Its inputs are every node's rows of
    the layer below, all-gathered from the ranks' shares over ``group`` (the default
    process group when ``world_size > 1``); below layer 0 are the features, each rank's
    share read from the store.
    """

    def __init__(
        self,
        store: PartitionStore,
        *,
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
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self.device = device or torch.device("cpu")
        self.bf16 = bf16 and self.device.type == "cuda"
        # the features enter as the training steps take them: bf16 under bf16 training
        self.input_dtype = torch.bfloat16 if self.bf16 else torch.float32
        self.group = group
        self.exchange_rows = exchange_rows
        self.on_host = on_host
        self.rows = StoreRows(store)
        self.indptr, self.indices = store.topology()
        self.shares = node_shares([int(o) for o in store.offsets], world_size)
        self.lo, self.hi = self.shares[rank]
        self.chunks = chunk_bounds(self.indptr, self.lo, self.hi, chunk_edges, chunk_nodes)
        self.degree = in_degrees(self.indptr, self.device)

    @property
    def share(self) -> tuple[int, int]:
        """The ids ``[lo, hi)`` whose logits this rank computes."""
        return self.lo, self.hi

    def _autocast(self) -> Any:
        if self.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _keep_on_host(self, width: int, dtype: torch.dtype) -> bool:
        if self.on_host is not None:
            return self.on_host
        if self.device.type != "cuda":
            return False
        need = self.store.meta.num_nodes * width * torch.tensor([], dtype=dtype).element_size()
        free, _ = torch.cuda.mem_get_info(self.device)
        # blocks the caching allocator holds but no tensor uses are free to this process
        free += torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        return need > DEVICE_MEMORY_SHARE * free

    def _gather(self, local: Tensor) -> LayerRows:
        return exchange(
            local,
            self.shares,
            self.rank,
            group=self.group,
            on_host=self._keep_on_host(local.size(1), local.dtype),
            chunk_rows=self.exchange_rows,
        )

    def _features(self) -> LayerRows:
        """Layer 0's inputs: each rank reads its share's features from the store, then all
        are gathered (a contiguous read each, rather than every neighbour's row from disk)."""
        x = torch.from_numpy(self.rows.feature_range(self.lo, self.hi))
        return self._gather(x.to(self.device, dtype=self.input_dtype))

    @torch.no_grad()
    def logits(self, model: nn.Module) -> Tensor:
        """Float32 logits ``[hi - lo, C]`` of this rank's share (every rank must call)."""
        if not hasattr(model, "inference_layer"):
            raise TypeError(
                f"{type(model).__name__} has no inference_layer for layer-wise inference"
            )
        layered: LayerwiseModel = model  # type: ignore[assignment]
        was_training = model.training
        model.eval()
        try:
            prev: LayerRows | None = self._features()
            for layer in range(layered.num_layers):
                assert prev is not None
                out = self._layer(layered, layer, prev)
                if layer == layered.num_layers - 1:
                    return out.float()
                prev = None  # free the previous layer's rows before gathering the next
                prev = self._gather(out)
                del out
            raise AssertionError("a model has at least one layer")
        finally:
            model.train(was_training)

    @torch.no_grad()
    def embeddings(self, model: nn.Module) -> LayerRows:
        """The last layer's output for every node, gathered from every rank's share (fp32)."""
        return self._gather(self.logits(model))

    def _layer(self, model: LayerwiseModel, layer: int, prev: LayerRows) -> Tensor:
        out: Tensor | None = None
        for a, b in self.chunks:
            block = build_block(self.indptr, self.indices, a, b, self.degree, self.device)
            x = prev.rows(block.nodes)
            with self._autocast():
                h = model.inference_layer(layer, x, block)
            if out is None:
                out = torch.empty((self.hi - self.lo, h.size(1)), dtype=h.dtype, device=self.device)
            out[a - self.lo : b - self.lo] = h
        assert out is not None, "every rank's share holds at least one node"
        return out
