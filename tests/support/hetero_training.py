"""Train R-SAGE on a typed graph two ways, with the same model size, fanouts, epochs, seeds,
batch size and optimizers, and return their test accuracies.

- ``train_reference``: plain PyG. ``NodeLoader`` over the ``HeteroData`` with the
  plain-PyTorch reference sampler (:class:`PyGHeteroNeighborSampler` with
  ``reference=True``; PyG's own ``NeighborLoader`` needs pyg-lib or torch-sparse),
  ``to_hetero(GraphSAGE, metadata, aggr="sum")``, and a sparse ``nn.Embedding`` per
  featureless type trained by ``torch.optim.SparseAdam``.
- ``train_distgnn``: the vectorised :class:`HeteroNeighborSampler`, the product's R-SAGE
  (:func:`build_hetero_model`), and one :class:`ShardedEmbedding` per featureless type as a
  single-process trainer holds them (world 1, :class:`RowExchange.local`), trained by
  :class:`RowSparseAdam` (lazy Adam, as ``SparseAdam``).

Both evaluate the same way: every test paper's whole 2-hop neighbourhood (the reference
on the whole graph at once, distgnn through the sampler with fanout -1), in eval mode.
Deterministic for a given config: seeded, on one CPU thread.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.pyg_hetero import to_pyg_hetero
from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from distgnn_workload.models import build_hetero_model
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler


@dataclass(frozen=True)
class TrainConfig:
    hidden: int = 32
    embedding_dim: int = 32
    fanouts: tuple[int, ...] = (10, 5)
    epochs: int = 5
    batch_size: int = 128
    lr: float = 0.01
    embedding_lr: float = 0.01
    dropout: float = 0.5
    seed: int = 0


@contextmanager
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def resplit(graph: HeteroGraphData, train_share: float, seed: int = 0) -> HeteroGraphData:
    """The graph with its target type's papers split at random into train (``train_share``)
    and test (the rest), no validation: a large test set keeps the evaluation noise of an
    accuracy comparison well below the margin it checks."""
    n = graph.num_target_nodes
    order = np.random.default_rng(seed).permutation(n)
    cut = int(train_share * n)
    train, test = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    train[order[:cut]] = True
    test[order[cut:]] = True
    labelled = graph.y >= 0
    return replace(
        graph,
        train_mask=train & labelled,
        val_mask=np.zeros(n, dtype=bool),
        test_mask=test & labelled,
    )


def _accuracy(logits: Tensor, y: Tensor) -> float:
    return float((logits.argmax(1) == y).float().mean())


def _index(mask: object) -> Tensor:
    return torch.as_tensor(mask).nonzero().flatten()


def train_reference(graph: HeteroGraphData, cfg: TrainConfig) -> float:
    """Plain PyG's test accuracy (see the module's docstring)."""
    from torch_geometric.loader import NodeLoader
    from torch_geometric.nn import GraphSAGE, to_hetero

    from distgnn_workload.sampling.pyg_adapter import PyGHeteroNeighborSampler

    target = graph.target_node_type
    data = to_pyg_hetero(graph)
    with one_thread():
        torch.manual_seed(cfg.seed)
        emb = nn.ModuleDict(
            {
                t: nn.Embedding(graph.node_counts[t], cfg.embedding_dim, sparse=True)
                for t in graph.featureless_types
            }
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gnn = GraphSAGE(
                (-1, -1),
                cfg.hidden,
                len(cfg.fanouts),
                out_channels=graph.num_classes,
                dropout=cfg.dropout,
            )
            model = to_hetero(gnn, data.metadata(), aggr="sum")

        def inputs(n_id: dict[str, Tensor]) -> dict[str, Tensor]:
            x = {t: e(n_id[t]) for t, e in emb.items()}
            return x | {t: data[t].x[n_id[t]] for t in graph.x}

        full = {t: torch.arange(graph.node_counts[t]) for t in graph.node_types}
        with torch.no_grad():  # materialise the lazy weights before the optimizer sees them
            model(inputs(full), data.edge_index_dict)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        sparse = torch.optim.SparseAdam(list(emb.parameters()), lr=cfg.embedding_lr)
        sampler = PyGHeteroNeighborSampler(data, list(cfg.fanouts), seed=cfg.seed, reference=True)
        loader = NodeLoader(
            data,
            node_sampler=sampler,
            input_nodes=(target, _index(graph.train_mask)),
            batch_size=cfg.batch_size,
            shuffle=True,
        )
        for _ in range(cfg.epochs):
            model.train()
            for batch in loader:
                size = batch[target].batch_size
                n_id = {t: batch[t].n_id for t in graph.node_types}
                logits = model(inputs(n_id), batch.edge_index_dict)[target][:size]
                loss = F.cross_entropy(logits, batch[target].y[:size])
                opt.zero_grad()
                sparse.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                opt.step()
                sparse.step()  # type: ignore[no-untyped-call]
        model.eval()
        with torch.no_grad():
            logits = model(inputs(full), data.edge_index_dict)[target]
        test = _index(graph.test_mask)
        return _accuracy(logits[test], data[target].y[test])


def train_distgnn(graph: HeteroGraphData, cfg: TrainConfig) -> float:
    """distgnn's sampler, R-SAGE and sharded embeddings: the test accuracy."""
    target = graph.target_node_type
    with one_thread():
        torch.manual_seed(cfg.seed)
        features = {t: torch.from_numpy(x) for t, x in graph.x.items()}
        labels = torch.from_numpy(graph.y)
        exchange = RowExchange.local()
        tables = {
            t: ShardedEmbedding(
                RowOwnership.single(t, graph.node_counts[t]),
                cfg.embedding_dim,
                exchange,
                seed=cfg.seed,
            )
            for t in graph.featureless_types
        }
        widths = {t: x.size(1) for t, x in features.items()}
        widths |= dict.fromkeys(tables, cfg.embedding_dim)
        spec = ModelSpec(
            arch=Arch.rsage,
            hidden_channels=cfg.hidden,
            num_layers=len(cfg.fanouts),
            fanout=list(cfg.fanouts),
            dropout=cfg.dropout,
            embedding_dim=cfg.embedding_dim,
        )
        model = build_hetero_model(
            spec, graph.node_types, graph.edge_types, widths, graph.num_classes, target
        )
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        sparse = RowSparseAdam(list(tables.values()), lr=cfg.embedding_lr)
        sampler = HeteroNeighborSampler(
            graph.in_csr, graph.node_counts, list(cfg.fanouts), seed_type=target, seed=cfg.seed
        )

        def inputs(node_ids: dict[str, Tensor]) -> dict[str, Tensor]:
            x = {t: table.lookup(node_ids[t]) for t, table in tables.items()}
            return x | {t: f[node_ids[t]] for t, f in features.items()}

        train = _index(graph.train_mask)
        for _ in range(cfg.epochs):
            model.train()
            for seeds in torch.split(train[torch.randperm(train.numel())], cfg.batch_size):
                batch = sampler.sample(seeds)
                opt.zero_grad()
                sparse.zero_grad()  # before the lookups: it drops the routes of pending ones
                logits = model(inputs(batch.node_ids), batch)
                loss = F.cross_entropy(logits, labels[batch.seed_ids])
                loss.backward()  # type: ignore[no-untyped-call]
                opt.step()
                sparse.step()
        model.eval()
        everything = HeteroNeighborSampler(
            graph.in_csr, graph.node_counts, [-1] * len(cfg.fanouts), seed_type=target
        )
        test = _index(graph.test_mask)
        correct = 0
        with torch.no_grad():
            for seeds in torch.split(test, cfg.batch_size):
                batch = everything.sample(seeds)
                logits = model(inputs(batch.node_ids), batch)
                correct += int((logits.argmax(1) == labels[seeds]).sum())
        return correct / test.numel()
