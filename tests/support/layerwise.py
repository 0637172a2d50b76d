"""A small partition store and the reference for layer-wise inference tests.

Shared by the single-process tests and the spawned processes of the distributed one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.data.graph import GraphData
from distgnn_workload.models import build_model
from distgnn_workload.models.layerwise import full_graph_hop
from distgnn_workload.partition import PartitionStore, write_partitions

NUM_NODES = 300
NUM_FEATURES = 12
NUM_CLASSES = 5
HIDDEN = 16
ARCHS = ("sage", "gcn", "gat")


def small_graph(seed: int = 3) -> GraphData:
    """A random graph with skewed degrees, a few isolated nodes, and label signal in ``x``."""
    rng = np.random.default_rng(seed)
    n = NUM_NODES
    hubs = rng.integers(0, 10, 400)  # a few high-degree nodes
    src = np.concatenate([rng.integers(0, n - 5, 1200), hubs])
    dst = np.concatenate([rng.integers(0, n - 5, 1200), rng.integers(0, n - 5, 400)])
    y = rng.integers(0, NUM_CLASSES, n)
    x = rng.standard_normal((n, NUM_FEATURES)).astype(np.float32)
    x[np.arange(n), y] += 2.0
    split = rng.integers(0, 3, n)
    return GraphData.from_edges(
        src, dst, x, y, split == 0, split == 1, split == 2, num_classes=NUM_CLASSES
    )


def write_store(path: Path, num_partitions: int) -> PartitionStore:
    """The small graph in partitions of unequal sizes (the last holds half the nodes),
    each node's partition drawn at random: most neighbourhoods cross partitions."""
    rng = np.random.default_rng(5)
    weights = np.full(num_partitions, 0.5 / max(1, num_partitions - 1))
    weights[-1] = 0.5 if num_partitions > 1 else 1.0
    assignment = rng.choice(num_partitions, size=NUM_NODES, p=weights)
    return write_partitions(path, small_graph(), num_partitions, assignment=assignment)


def model_of(arch: str, num_layers: int = 3) -> nn.Module:
    torch.manual_seed(7)
    spec = ModelSpec(
        arch=Arch(arch),
        hidden_channels=HIDDEN,
        num_layers=num_layers,
        fanout=[2] * num_layers,
        heads=2,
    )
    return build_model(spec, NUM_FEATURES, NUM_CLASSES).eval()


@torch.no_grad()
def full_graph_logits(model: nn.Module, store: PartitionStore) -> Tensor:
    """The model's plain forward over the whole graph (every node a seed), in new ids."""
    graph = store.to_graph()
    indptr = torch.from_numpy(np.asarray(graph.indptr, dtype=np.int64))
    indices = torch.from_numpy(np.asarray(graph.indices, dtype=np.int64))
    hop = full_graph_hop(indptr, indices, model.num_layers)  # type: ignore[arg-type]
    out: Tensor = model(torch.from_numpy(np.asarray(graph.x)), hop)
    return out
