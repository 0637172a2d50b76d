"""A small typed graph, relational models over it and their full-graph forward: the reference
for typed layer-wise inference, shared by the single-process tests and the spawned ranks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.embeddings import (
    RowExchange,
    RowOwnership,
    ShardedEmbedding,
    initial_rows,
)
from distgnn_workload.evaluation import LayerwiseInference
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.models.rgcn import RGCN
from distgnn_workload.models.rsage import RSAGE
from distgnn_workload.sampling import HeteroHopBatch
from tests.support.ranks import gloo_rank
from tests.workload.hetero_graphs import MAG_LIKE, NUM_NODES, typed_graph

CSR = tuple[Tensor, Tensor]
EDGE_TYPES: list[EdgeType] = list(MAG_LIKE)
NODE_TYPES = list(NUM_NODES)
FEATURED = {"paper": 16, "institution": 12}
"""Node types with features (the others take embedding rows of EMBEDDING_DIM)."""
EMBEDDING_DIM = 8
HIDDEN, CLASSES = 24, 5
ARCHS = ("rsage", "rgcn")
SEED = 11


def widths() -> dict[str, int]:
    return {t: FEATURED.get(t, EMBEDDING_DIM) for t in NODE_TYPES}


def graph() -> dict[EdgeType, CSR]:
    """The typed in-CSR of the small MAG-shaped graph (some nodes without in-edges)."""
    _, csr = typed_graph(4)
    return csr


def features() -> dict[str, Tensor]:
    g = torch.Generator().manual_seed(SEED)
    return {t: torch.randn(NUM_NODES[t], w, generator=g) for t, w in FEATURED.items()}


def inputs() -> dict[str, Tensor]:
    """Every node type's layer-0 rows: features, else the embeddings' initial rows."""
    x = features()
    for t in NODE_TYPES:
        if t not in x:
            rows = torch.arange(NUM_NODES[t], dtype=torch.int64)
            x[t] = initial_rows(SEED, t, rows, EMBEDDING_DIM)
    return x


def model_of(arch: str, num_layers: int) -> RelationalGNN:
    torch.manual_seed(7)
    args = (NODE_TYPES, EDGE_TYPES, widths(), HIDDEN, CLASSES, num_layers, "paper")
    model: RelationalGNN = RSAGE(*args) if arch == "rsage" else RGCN(*args)
    with torch.no_grad():  # biases away from their zero initialisation
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def full_graph_batch(csr: dict[EdgeType, CSR], num_layers: int) -> HeteroHopBatch:
    """The whole typed graph as one batch: every node at hop 0 (every paper a seed), every
    edge in every layer. A relational model's forward over it is its full-graph forward."""
    edge_index, target_ptr = {}, {}
    for et, (indptr, indices) in csr.items():
        counts = indptr[1:] - indptr[:-1]
        dst = torch.repeat_interleave(torch.arange(NUM_NODES[et[2]]), counts)
        edge_index[et] = torch.stack([indices.to(torch.int64), dst])
        target_ptr[et] = indptr.to(torch.int64)
    return HeteroHopBatch(
        seed_type="paper",
        num_seeds=NUM_NODES["paper"],
        node_ids={t: torch.arange(n) for t, n in NUM_NODES.items()},
        num_nodes_per_hop={t: [n] + [0] * num_layers for t, n in NUM_NODES.items()},
        edge_index=edge_index,
        num_edges_per_hop={
            et: [int(ei.size(1))] + [0] * (num_layers - 1) for et, ei in edge_index.items()
        },
        target_ptr=target_ptr,
    )


def sharded_rows(rank: int, world_size: int) -> Callable[[str, int, int], Tensor]:
    """A rank's layer-0 rows of a node type's range: the featureless types' from sharded
    embeddings looked up collectively, the others' from :func:`features`. Call it inside a
    joined group (:func:`tests.support.ranks.gloo_rank`)."""
    exchange = RowExchange(rank, world_size, torch.device("cpu"))
    tables = {
        t: ShardedEmbedding(
            RowOwnership.contiguous(t, NUM_NODES[t], world_size),
            EMBEDDING_DIM,
            exchange,
            seed=SEED,
        )
        for t in NODE_TYPES
        if t not in FEATURED
    }
    x = features()

    def rows(node_type: str, lo: int, hi: int) -> Tensor:
        if node_type in tables:
            return tables[node_type].lookup(torch.arange(lo, hi))
        return x[node_type][lo:hi]

    return rows


def chunked_inference(
    rows: Callable[[str, int, int], Tensor], rank: int, world_size: int
) -> LayerwiseInference:
    """A rank's layer-wise inference over :func:`graph` in small chunks (so that they split)."""
    return LayerwiseInference(
        graph(),
        NUM_NODES,
        rows,
        rank=rank,
        world_size=world_size,
        chunk_edges=53,
        chunk_nodes=17,
        exchange_rows=11,
    )


def evaluate_rank(rank: int, world_size: int, port: int, out: str, num_layers: int) -> None:
    """One trainer: join a gloo group, look its shares' embedding rows up collectively and run
    each arch's layer-wise inference with small chunks; write its logits to ``out``."""
    with gloo_rank(rank, world_size, port):
        rows = sharded_rows(rank, world_size)
        for arch in ARCHS:
            engine = chunked_inference(rows, rank, world_size)
            logits = engine.logits(model_of(arch, num_layers))
            torch.save(
                {"share": engine.share("paper"), "logits": logits},
                Path(out) / f"{arch}-{rank}.pt",
            )
