"""A small graph whose links are learnable, its edge split, a store of its training edges,
and an in-process link trainer over it (single process, CPU, worker-mode pipeline)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_workload.data.graph import GraphData
from distgnn_workload.evaluation.link_ranking import LinkSplit
from distgnn_workload.loader.features import LocalFeatureSource
from distgnn_workload.partition import PartitionStore, write_partitions
from distgnn_workload.runtime.batches import LocalPipeline
from distgnn_workload.runtime.link_batches import for_task
from distgnn_workload.sampling import NeighborSampler
from distgnn_workload.sampling.seed_edges import pack_pairs
from distgnn_workload.trainer.link_loop import LinkTrainer

NUM_NODES = 400
NUM_FEATURES = 16
COMMUNITIES = 8


@dataclass(frozen=True)
class LinkGraph:
    """Node features, and the undirected edges split into train, valid and test (src < dst
    not required); ``valid_neg``/``test_neg`` are fixed destinations, [E, K]."""

    x: np.ndarray
    train: tuple[Tensor, Tensor]
    valid: tuple[Tensor, Tensor, Tensor]
    test: tuple[Tensor, Tensor, Tensor]


def community_graph(seed: int = 0, negatives: int = 50) -> LinkGraph:
    """Nodes in communities that noisy features reveal; 85% of edges inside a community."""
    rng = np.random.default_rng(seed)
    n = NUM_NODES
    community = rng.integers(0, COMMUNITIES, n)
    centres = rng.standard_normal((COMMUNITIES, NUM_FEATURES)).astype(np.float32)
    x = centres[community] + 1.0 * rng.standard_normal((n, NUM_FEATURES)).astype(np.float32)
    members = [np.flatnonzero(community == c) for c in range(COMMUNITIES)]
    src = rng.integers(0, n, 3000)
    inside = rng.random(3000) < 0.85
    dst = np.where(
        inside,
        [rng.choice(members[community[s]]) for s in src],
        rng.integers(0, n, 3000),
    )
    keep = src != dst
    key = np.unique(np.minimum(src, dst)[keep] * n + np.maximum(src, dst)[keep])
    rng.shuffle(key)
    s, d = torch.from_numpy(key // n), torch.from_numpy(key % n)
    e = len(key)
    n_val = n_test = e // 10
    g = torch.Generator().manual_seed(seed)

    def held(lo: int, hi: int) -> tuple[Tensor, Tensor, Tensor]:
        return s[lo:hi], d[lo:hi], torch.randint(0, n, (hi - lo, negatives), generator=g)

    return LinkGraph(
        x=x,
        train=(s[n_val + n_test :], d[n_val + n_test :]),
        valid=held(0, n_val),
        test=held(n_val, n_val + n_test),
    )


def write_link_store(path: Path, graph: LinkGraph, num_partitions: int = 2) -> PartitionStore:
    """The training edges (both directions) in contiguous partitions: store ids = node ids."""
    n = NUM_NODES
    src, dst = graph.train
    zeros = np.zeros(n, dtype=bool)
    data = GraphData.from_edges(
        src.numpy(), dst.numpy(), graph.x, np.zeros(n, dtype=np.int64), ~zeros, zeros, zeros
    )
    assignment = (np.arange(n) * num_partitions) // n
    return write_partitions(path, data, num_partitions, assignment=assignment)


def link_spec(**link: object) -> DistGNNJobSpec:
    return parse_spec(
        {
            "task": "linkPrediction",
            "linkPrediction": {
                "evaluation": {"negatives": 50, "hitsAt": [1, 10, 50]},
                **link,
            },
            "dataset": {"syntheticLink": {"scale": 0.001}},
            "model": {"arch": "sage", "hiddenChannels": 32, "numLayers": 2, "fanout": [10, 5]},
            "training": {"epochs": 6, "batchSize": 64, "learningRate": 0.01, "seed": 1},
        }
    )


def train_in_process(
    spec: DistGNNJobSpec, graph: LinkGraph, store: PartitionStore, run_dir: Path
) -> LinkTrainer:
    """Train a LinkTrainer for the spec's epochs in this process; returns it after ``fit``."""
    return train_on(
        spec,
        store,
        run_dir,
        x=torch.from_numpy(graph.x),
        train_pairs=pack_pairs(*graph.train, NUM_NODES),
        splits={"val": graph.valid, "test": graph.test},
    )


def train_on(
    spec: DistGNNJobSpec,
    store: PartitionStore,
    run_dir: Path,
    *,
    x: Tensor,
    train_pairs: Tensor,
    splits: dict[str, LinkSplit],
    sampler_seed: int = 5,
) -> LinkTrainer:
    """A single-process LinkTrainer over ``store``'s topology with a worker-mode pipeline
    (features ``x`` by store id, one holder), trained for the spec's epochs."""
    indptr, indices = store.topology()
    nodes = NeighborSampler(indptr, indices, spec.model.fanout, device="cpu", seed=sampler_seed)
    num_nodes = store.meta.num_nodes
    pipeline = LocalPipeline(
        for_task(spec, nodes),
        LocalFeatureSource(x, None, "cpu"),
        torch.zeros(num_nodes, dtype=torch.int64),
        device=torch.device("cpu"),
        prefetch=1,
    )
    trainer = LinkTrainer(
        spec,
        splits=splits,
        partition_dir=store.path,
        num_features=int(x.shape[1]),
        rank=0,
        world_size=1,
        device=torch.device("cpu"),
        pipeline=pipeline,
        train_ids=[train_pairs],
        ranks_of_holder=[[0]],
        run_dir=run_dir,
        job_uid="uid-link",
    )
    trainer.result = trainer.fit()  # type: ignore[attr-defined]
    return trainer
