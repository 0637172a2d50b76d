"""The PyG side of the heterogeneous benchmark: the ``HeteroData``, its loaders, the model.

- The graph is the benchmark's typed store read back (``HeteroPartitionStore.to_graph``) or
  the same ``syntheticMag`` generated again (deterministic by seed), as a ``HeteroData``
  (``to_pyg_hetero``: the reverse relations included, as stored).
- ``stock``: the paper features and labels in host memory, collated into each mini-batch by
  the loader's workers; no pinning; ``NeighborLoader`` as PyG's examples build it.
- ``best``: features and labels resident on the training device; the loader samples and
  returns node ids only (``n_id`` per node type), in pinned memory, with persistent workers
  and ``prefetch_factor`` 4; the step gathers the rows on the device.
- The model: ``to_hetero(GraphSAGE((-1, -1), hidden, layers), metadata, aggr="sum")`` and a
  sparse ``nn.Embedding`` per featureless node type on the device (``SparseAdam``), the rest
  trained by Adam; fp32 or bf16 autocast (bf16 features in the best setup).

Both sample on the CPU with PyG's ``NeighborSampler`` (pyg-lib or torch-sparse), or, with
``sampler="distgnn"``, ``NodeLoader`` over our ``PyGHeteroNeighborSampler`` (no extension
needed: the CPU smoke test).
"""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from pyg_setups import loader_kwargs, pyg_loader
from torch import Tensor, nn

from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.pyg_hetero import to_pyg_hetero


@dataclass
class HeteroGraph:
    """``data`` for the loader (CPU); ``x``/``y`` of the target type where the setup keeps them."""

    data: Any  # torch_geometric.data.HeteroData
    target: str
    x: Tensor
    y: Tensor
    train_idx: Tensor
    node_counts: dict[str, int]
    featureless: list[str]
    num_classes: int


def load_graph(store: Path | None, scale: float, graph_seed: int) -> HeteroGraphData:
    """The benchmark's typed graph: the store's, else ``syntheticMag`` generated again."""
    if store is not None:
        from distgnn_workload.partition import HeteroPartitionStore

        return HeteroPartitionStore.open(store).to_graph()
    from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag

    return generate_mag(SyntheticHeteroConfig(scale=scale, seed=graph_seed))


def build_graph(graph: HeteroGraphData, *, setup: str, device: torch.device) -> HeteroGraph:
    """The ``HeteroData`` of ``graph``, features placed as ``setup`` says."""
    data = to_pyg_hetero(graph)
    target = graph.target_node_type
    x, y = data[target].x, data[target].y
    train_idx = data[target].train_mask.nonzero().flatten()
    for name in ("train_mask", "val_mask", "test_mask"):
        del data[target][name]
    if setup == "best":
        x, y = x.to(device), y.to(device)
        del data[target].x, data[target].y  # the loader sees the topology only
    return HeteroGraph(
        data=data,
        target=target,
        x=x,
        y=y,
        train_idx=train_idx,
        node_counts=dict(graph.node_counts),
        featureless=list(graph.featureless_types),
        num_classes=graph.num_classes,
    )


def build_node_sampler(g: HeteroGraph, *, sampler: str, fanout: list[int], seed: int) -> Any:
    """One sampler, shared by the loaders of every worker count (its CSCs are built once)."""
    if sampler == "distgnn":
        from distgnn_workload.sampling.pyg_adapter import PyGHeteroNeighborSampler

        return PyGHeteroNeighborSampler(g.data, fanout, seed=seed)
    from torch_geometric.sampler import NeighborSampler

    return NeighborSampler(g.data, fanout, share_memory=True)


def build_loader(
    g: HeteroGraph, node_sampler: Any, *, sampler: str, fanout: list[int], **options: Any
) -> Any:
    """The setup's loader over the target type's training seeds; ``options``: those of
    ``loader_kwargs`` (setup, batch size, worker processes, pinning)."""
    kwargs = loader_kwargs((g.target, g.train_idx), **options)
    return pyg_loader(g.data, node_sampler, sampler, fanout, kwargs)


@dataclass
class HeteroBatch:
    """A mini-batch on the training device, ready for the step."""

    x: dict[str, Tensor]  # featured types' rows; featureless types: their ids
    edge_index: dict[Any, Tensor]
    y: Tensor
    batch_size: int


def prepare(g: HeteroGraph, batch: Any, device: torch.device, x_table: Tensor) -> HeteroBatch:
    """The loader's batch on the device: features collated (stock) or gathered from
    ``x_table`` (best: ``g.x`` on the device, in the run's precision)."""
    t = g.target
    bs = int(batch[t].batch_size)
    ids = {n: batch[n].n_id.to(device, non_blocking=True) for n in g.featureless}
    if "x" in batch[t]:  # stock: the workers collated them
        x = batch[t].x.to(device, non_blocking=True)
        y = batch[t].y[:bs].to(device, non_blocking=True)
    else:
        n_id = batch[t].n_id.to(device, non_blocking=True)
        x, y = x_table[n_id], g.y[n_id[:bs]]
    edges = {et: e.to(device, non_blocking=True) for et, e in batch.edge_index_dict.items()}
    return HeteroBatch(x={t: x, **ids}, edge_index=edges, y=y, batch_size=bs)


class HeteroTrainer:
    """``to_hetero(GraphSAGE)`` + sparse embeddings for featureless types; Adam + SparseAdam."""

    def __init__(
        self,
        g: HeteroGraph,
        first: HeteroBatch,
        *,
        hidden: int,
        layers: int,
        embedding_dim: int,
        device: torch.device,
        precision: str,
        seed: int,
    ) -> None:
        from torch_geometric.nn import GraphSAGE, to_hetero

        torch.manual_seed(seed)
        self.device, self.precision, self.target = device, precision, g.target
        self.emb = nn.ModuleDict(
            {t: nn.Embedding(g.node_counts[t], embedding_dim, sparse=True) for t in g.featureless}
        ).to(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gnn = GraphSAGE((-1, -1), hidden, layers, out_channels=g.num_classes, dropout=0.5)
            self.model = to_hetero(gnn, g.data.metadata(), aggr="sum").to(device)
        with torch.no_grad(), self.autocast():  # materialise the lazy weights
            self.model(self.inputs(first), first.edge_index)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-3)
        self.sparse = torch.optim.SparseAdam(list(self.emb.parameters()), lr=3e-3)

    def autocast(self) -> AbstractContextManager[Any]:
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def inputs(self, b: HeteroBatch) -> dict[str, Tensor]:
        return {t: self.emb[t](v) if t in self.emb else v for t, v in b.x.items()}

    def step(self, b: HeteroBatch) -> Tensor:
        with self.autocast():
            out = self.model(self.inputs(b), b.edge_index)[self.target][: b.batch_size]
            loss = F.cross_entropy(out.float(), b.y)
        self.opt.zero_grad(set_to_none=True)
        self.sparse.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        self.opt.step()
        self.sparse.step()  # type: ignore[no-untyped-call]
        return loss.detach()
