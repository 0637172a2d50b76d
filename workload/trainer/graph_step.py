"""The fixed-shape training steps, specialisations of the one captured step
(:class:`~distgnn_workload.trainer.captured_step.CapturedStep`: warm-up, capture, the ranks'
agreement, the flat all-reduce of the dense gradients): the GraphSAGE step of a one-type
graph (:class:`GraphStep`) and the relational step of a typed graph
(:class:`HeteroGraphStep`); the link step is :mod:`.link_graph_step`'s.

:class:`GraphStep` runs over the padded hops of a
:class:`~distgnn_workload.sampling.StaticLayout` (the pipeline pads on its loader thread).
:class:`HeteroGraphStep` runs the relational model's forward and backward over the bounds of
the typed sampler (:class:`~distgnn_workload.sampling.static_hops.HeteroStaticHops`).

The learnt embeddings' lookups and their row-sparse update are part of the step: the
batch's ids of each featureless type go into fixed buffers, the forward looks them up
(:meth:`~distgnn_workload.embeddings.ShardedEmbedding.lookup_padded`: with several ranks an
all-to-all of fixed blocks, no counts), the backward sums their row gradients and the step
ends with the row-sparse Adam (its all-to-all of fixed blocks too), so that one replay runs
all of it and nothing is read back. Per step, the host copies the batch's edges and sizes,
the featured types' rows and the featureless types' ids into the fixed inputs, replays the
graph, then all-reduces the dense gradients and runs the dense optimizer.

Padding rows get zero gradients (see the layout's module) and padding ids are left out of
the lookups, so the sparse optimizer touches exactly the rows the batch holds, as in the
eager step. A batch over the caps steps eagerly with counted lookups; with several ranks
every rank then does (the ranks agree on the host each step), so their collectives match.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.embeddings import RowSparseAdam, ShardedEmbedding, lookup_tables
from distgnn_workload.loader import HeteroMiniBatch, MiniBatch
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.pinned_copies import copy_in
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.runtime.transfers import wait_for_event
from distgnn_workload.sampling import StaticHops, StaticLayout
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.static_hops import HeteroStaticHops
from distgnn_workload.sampling.static_sample import StaticCaps, fitted_cap
from distgnn_workload.trainer.captured_step import CapturedStep, StepOptions
from distgnn_workload.trainer.step_policy import GRAPH_MEMORY_SHARE, cuda_graph_setting

log = logging.getLogger(__name__)


class PaddedStep(CapturedStep):
    """A step over the padded hops of a :class:`StaticLayout` and their nodes' features
    (the pipeline pads on its loader thread: batches carry their padded form in
    ``static``)."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        layout: StaticLayout,
        *,
        num_features: int,
        input_dtype: torch.dtype,
        **options: Unpack[StepOptions],
    ) -> None:
        super().__init__(model, optimizer, batch_size=layout.batch_size, **options)
        device = options["device"]
        self.layout = layout
        # finite everywhere: padding rows are read (and multiplied by zero gradients)
        self.x = torch.zeros(layout.node_cap + 1, num_features, dtype=input_dtype, device=device)
        index = torch.zeros(sum(layout.index_sizes()), dtype=torch.int64, device=device)
        self.hops = StaticHops(layout, index)

    def _load_padded(self, batch: MiniBatch) -> StaticHops:
        """Copy ``batch``'s features and padded hops into the inputs; returns its padded
        form."""
        static = batch.static
        if static is None:
            raise ValueError(
                f"{type(self).__name__} needs batches padded to its layout (pipeline static=)"
            )
        if static.layout != self.layout:
            raise ValueError(f"a batch padded to {static.layout}, not {self.layout}")
        self.x[: static.num_nodes].copy_(batch.x, non_blocking=True)
        self.hops.index.copy_(static.index, non_blocking=True)
        return static


class GraphStep(PaddedStep):
    """The GraphSAGE step over a :class:`StaticLayout`."""

    def __init__(
        self,
        model: GraphSAGE,
        optimizer: torch.optim.Optimizer,
        layout: StaticLayout,
        *,
        num_features: int,
        input_dtype: torch.dtype,
        **options: Unpack[StepOptions],
    ) -> None:
        super().__init__(
            model, optimizer, layout, num_features=num_features, input_dtype=input_dtype, **options
        )
        self.sage = model

    def _load(self, batch: MiniBatch) -> None:
        static = self._load_padded(batch)
        self.y[: static.num_seeds].copy_(batch.y, non_blocking=True)
        self.num_seeds.fill_(static.num_seeds)

    def _logits(self) -> Tensor:
        return self.sage.forward_static(self.x, self.hops)


def typed_caps(
    node_counts: Mapping[str, int],
    edge_types: Sequence[EdgeType],
    fanouts: Mapping[EdgeType, Sequence[int]],
    target_node_type: str,
    batch_size: int,
    widths: Mapping[str, tuple[int, int]],
    device: torch.device,
    fitted: StaticCaps | None = None,
) -> StaticCaps | None:
    """The caps of fixed-shape typed steps (``fitted``, the sampler's caps fitted to its
    batches, else the bounds), or None where steps stay eager.

    ``widths[t]`` is ``(row width, bytes per element)`` of every input type. Graph steps need
    a GPU (or ``DISTGNN_CUDA_GRAPH=static``: the same computation eagerly, for tests),
    bounded fanouts, and fixed inputs within a small share of the GPU's memory.
    """
    want = cuda_graph_setting()
    if want in ("0", "false", "no"):
        return None
    if device.type != "cuda" and want != "static":
        return None
    if any(k < 0 for ks in fanouts.values() for k in ks):
        return None
    caps = fitted or StaticCaps.bounds(
        node_counts, edge_types, fanouts, target_node_type, batch_size
    )
    inputs = sum(sum(caps.nodes[t]) * w * b for t, (w, b) in widths.items())
    index = 8 * sum(2 * sum(caps.edges[et]) + caps.target_cap(et[2]) for et in edge_types)
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        if inputs + index > GRAPH_MEMORY_SHARE * total:
            log.info(
                "typed steps stay eager: fixed-shape inputs would take %.1f GiB",
                (inputs + index) / 2**30,
            )
            return None
    return caps


class HeteroGraphStep(CapturedStep):
    """Fixed-shape steps of a relational model, replayed from a CUDA graph after warm-up."""

    def __init__(
        self,
        model: RelationalGNN,
        optimizer: torch.optim.Optimizer,
        caps: StaticCaps,
        edge_types: Sequence[EdgeType],
        *,
        features: Mapping[str, tuple[int, torch.dtype]],
        tables: Sequence[ShardedEmbedding],
        sparse: RowSparseAdam | None,
        blocks: Mapping[str, int] | None = None,
        **options: Unpack[StepOptions],
    ) -> None:
        """``blocks``: per learnt table's type, the slots of the block that each rank's
        lookups send each owner (equal on every rank; at most the type's buffer), rather
        than the whole buffer; a batch that holds more nodes of one owner (its
        ``owner_counts``) steps eagerly. None: whole buffers."""
        device = options["device"]
        self.hops = HeteroStaticHops(caps, edge_types, device)
        super().__init__(model, optimizer, batch_size=self.hops.seed_cap, **options)
        self.relational = model
        self.tables = list(tables)
        self.sparse = sparse
        # finite everywhere: rows past a batch's real ones are read, with zero gradients
        self.x: dict[str, Tensor] = {
            t: torch.zeros(self.hops.node_cap(t), width, dtype=dtype, device=device)
            for t, (width, dtype) in features.items()
        }
        # the ids each table looks up, and their real number per table
        self.ids = {
            t.node_type: torch.zeros(
                self.hops.node_cap(t.node_type), dtype=torch.int64, device=device
            )
            for t in self.tables
        }
        self.id_counts = torch.zeros(len(self.tables), dtype=torch.int64, device=device)
        self.blocks: dict[str, int] = {}
        """Per table's type, the slots of the block each rank sends each owner."""
        if blocks is not None and self.world_size > 1:
            for table in self.tables:
                t = table.node_type
                self.blocks[t] = min(blocks[t], self.hops.node_cap(t))
            log.info(
                "embedding lookups in blocks of %s slots per rank (buffers of %s)",
                self.blocks,
                {t: self.hops.node_cap(t) for t in self.blocks},
            )
        self.oversize = 0
        """Steps that ran eagerly: their batch (on some rank) was over the (fitted) caps or
        held more of one owner's nodes than an embedding block."""

    def _load(self, batch: HeteroMiniBatch) -> None:
        hop = batch.hop
        if hop.num_seeds > self.batch_size:
            raise ValueError(f"{hop.num_seeds} seeds exceed the step's batch {self.batch_size}")
        self.hops.load(hop)
        for t, buffer in self.x.items():
            rows = batch.x[t]
            buffer[: rows.size(0)].copy_(rows, non_blocking=True)
        counts = []
        for table in self.tables:
            ids = hop.node_ids[table.node_type]
            self.ids[table.node_type][: ids.numel()].copy_(ids, non_blocking=True)
            counts.append(ids.numel())
        copy_in(self.id_counts, counts)
        self.y[: hop.num_seeds].copy_(batch.y, non_blocking=True)
        self.num_seeds.fill_(hop.num_seeds)

    def _look_up(self, hop: HeteroHopBatch) -> list[tuple[ShardedEmbedding, Tensor]]:
        """Every table's rows of the batch's nodes (collective: the same tables in the same
        order on every rank, their counts in one exchange)."""
        ids = [hop.node_ids[table.node_type] for table in self.tables]
        return list(zip(self.tables, lookup_tables(self.tables, ids), strict=True))

    def _logits(self) -> Tensor:
        inputs = dict(self.x)
        for i, table in enumerate(self.tables):
            t = table.node_type
            inputs[t] = table.lookup_padded(self.ids[t], self.id_counts[i], self.blocks.get(t))
        return self.relational.forward_static(inputs, self.hops)

    def _forward_backward(self) -> Tensor:
        loss = super()._forward_backward()
        if self.sparse is not None:
            self.sparse.step()  # collective with several ranks: the row gradients' blocks
        return loss

    def _capture(self) -> torch.cuda.CUDAGraph | None:
        steps = self.sparse.host_steps() if self.sparse is not None else {}
        graph = super()._capture()
        if graph is None and self.sparse is not None:
            self.sparse.set_host_steps(steps)  # the failed capture ran no step
        return graph

    def step(self, batch: Any) -> Tensor:
        fits = self.hops.fits(batch.hop) and self._within_blocks(batch)
        if self.world_size > 1 and self.tables:
            # a replay's lookups exchange fixed blocks, an eager step's counted ones: every
            # rank takes the eager path when one batch is over the caps (a host all-reduce)
            fits = self._all_ranks_ok(fits)
        if not fits:
            return self._oversize_step(batch)
        replay = self.graph is not None
        loss = super().step(batch)
        if replay:  # the host's share of the lookups and updates the replay ran
            for table in self.tables:
                table.replayed()
            if self.sparse is not None:
                self.sparse.replayed([table.node_type for table in self.tables])
        return loss

    def _within_blocks(self, batch: HeteroMiniBatch) -> bool:
        """Whether no owner holds more of the batch's nodes of a learnt type than its
        lookup's block has slots (the pipeline counted them; uncounted: no)."""
        if not self.blocks:
            return True
        counts = batch.owner_counts
        if counts is None:
            return False
        return all(max(counts[t]) <= block for t, block in self.blocks.items())

    def _oversize_step(self, batch: HeteroMiniBatch) -> Tensor:
        """A batch over fitted caps (the sampler sampled it again, exactly) or an embedding
        block, here or on another rank: the same step eagerly on its own sizes, with a
        replay's collectives in a replay's order (the lookups, the dense gradients'
        all-reduce, the row-sparse step), so that every rank stays in step whatever the
        others run. With bucketed all-reduces (each launched in its backward's order) the
        trainer keeps the bounds and whole-buffer blocks, which no batch exceeds."""
        self.oversize += 1
        if self._replayed is not None:
            wait_for_event(self._replayed, timeout_s=None, what="the last replay")
        hop = batch.hop
        x = dict(batch.x)
        for table, rows in self._look_up(hop):
            x[table.node_type] = rows
        # after a capture the gradients live in the graph's memory, where parameters summed
        # in the forward (a relation's root weights) share one: compute fresh ones, copy in
        held = [p.grad for p in self.params] if self.graph is not None else None
        self._zero_grad()
        with self._autocast():
            logits = self.relational(x, hop)
        loss = F.cross_entropy(logits.float(), batch.y)
        (loss / self.world_size).backward()  # type: ignore[no-untyped-call]
        if held is not None and self.buckets is None:
            for p, kept in zip(self.params, held, strict=True):
                if kept is None:
                    continue
                if p.grad is None:
                    kept.zero_()
                else:
                    kept.copy_(p.grad)
                p.grad = kept
        if self.buckets is not None:
            self.buckets.finish()
        else:
            self._all_reduce_grads()
        self.optimizer.step()
        self.steps += 1
        if self.sparse is not None:
            self.sparse.step()
        return loss.detach()


def typed_graph_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    data: HeteroTrainingData,
    fanouts: Mapping[EdgeType, Sequence[int]],
    *,
    batch_size: int,
    embedding_size: int,
    input_dtype: torch.dtype,
    tables: Sequence[ShardedEmbedding],
    sparse: RowSparseAdam | None,
    fitted: StaticCaps | None = None,
    owner_peaks: Mapping[str, int] | None = None,
    **options: Unpack[StepOptions],
) -> HeteroGraphStep | None:
    """The fixed-shape (CUDA-graph) step of a relational ``model`` over ``data``, where it
    can run (see :func:`typed_caps`; ``fitted``: the sampler's fitted caps;
    ``owner_peaks``: per learnt table's type, the most nodes one rank owned in one of the
    batches fitted to, which sizes :class:`HeteroGraphStep`'s blocks as the caps are);
    None: the steps stay eager."""
    device = options["device"]
    if not isinstance(model, RelationalGNN):
        return None
    element = torch.tensor([], dtype=input_dtype).element_size()
    widths = data.in_channels(embedding_size)
    inputs = {t: (widths[t], element) for t in model.plan.input_types}
    caps = typed_caps(
        data.node_counts,
        data.edge_types,
        fanouts,
        data.target_node_type,
        batch_size,
        inputs,
        device,
        fitted,
    )
    if caps is None:
        return None
    featured = [t for t in model.plan.input_types if t in data.x]
    return HeteroGraphStep(
        model,
        optimizer,
        caps,
        data.edge_types,
        features={t: (widths[t], input_dtype) for t in featured},
        tables=[t for t in tables if t.node_type in model.plan.input_types],
        sparse=sparse,
        blocks=None
        if owner_peaks is None
        else {t: fitted_cap(p, sum(caps.nodes[t])) for t, p in owner_peaks.items()},
        **options,
    )
