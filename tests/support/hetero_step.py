"""The parts of a typed fixed-shape step on a small MAG-shaped graph: its features and
labels on a device, a relational model, the typed sampler and its static bounds, and
learnt embeddings of the featureless types."""

from __future__ import annotations

import torch
from torch import Tensor

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.embeddings import RowExchange, RowOwnership, ShardedEmbedding
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.models import build_hetero_model
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.static_sample import StaticCaps

FANOUTS = (4, 3)
BATCH = 64
DIM = 8


class HeteroParts:
    """The graph, its features and labels on ``device``, a relational ``arch`` model (seeded)
    and the typed sampler (``static_shapes``: its fixed-shape execution) with its bounds."""

    def __init__(self, arch: Arch, device: torch.device, *, static_shapes: bool) -> None:
        graph = generate_mag(
            SyntheticHeteroConfig(scale=0.002, seed=1, num_classes=5, num_features=12)
        )
        self.graph = graph
        self.device = device
        target = graph.target_node_type
        self.features = {t: torch.from_numpy(x).to(device) for t, x in graph.x.items()}
        widths = {t: x.size(1) for t, x in self.features.items()}
        widths |= dict.fromkeys(graph.featureless_types, DIM)
        spec = ModelSpec(
            arch=arch,
            hidden_channels=16,
            num_layers=2,
            fanout=list(FANOUTS),
            dropout=0.0,
            embedding_dim=DIM,
        )
        torch.manual_seed(0)
        model = build_hetero_model(
            spec, graph.node_types, graph.edge_types, widths, graph.num_classes, target
        ).to(device)
        assert isinstance(model, RelationalGNN)
        self.model = model
        self.sampler = HeteroNeighborSampler(
            graph.in_csr,
            graph.node_counts,
            list(FANOUTS),
            seed_type=target,
            seed=3,
            device=device,
            static_shapes=static_shapes,
        )
        self.labels = torch.from_numpy(graph.y).to(device)
        self.caps = StaticCaps.bounds(
            graph.node_counts,
            graph.edge_types,
            {et: list(FANOUTS) for et in graph.edge_types},
            target,
            BATCH,
        )

    def fitted_caps(self, seeds: int, headroom: float) -> StaticCaps:
        """Caps fitted to three batches of ``seeds`` training seeds (slack 2, no rounding):
        batches of the full capacity go over them when ``seeds`` is well below it."""
        train = torch.from_numpy(self.graph.train_mask).nonzero().flatten().to(self.device)
        seen = [self.sampler.sample(train[i * seeds : (i + 1) * seeds]) for i in range(3)]
        fanouts = {et: list(FANOUTS) for et in self.caps.edges}
        return self.caps.fitted(seen, fanouts, headroom=headroom, slack=2, multiple=1)

    def new_tables(self) -> list[ShardedEmbedding]:
        """One-rank embeddings of the featureless types, the same rows each call."""
        exchange = RowExchange.local(self.device)
        return [
            ShardedEmbedding(
                RowOwnership.single(t, self.graph.node_counts[t]), DIM, exchange, seed=5
            )
            for t in self.graph.featureless_types
        ]

    def batch(self, seeds: Tensor) -> HeteroMiniBatch:
        hop = self.sampler.sample(seeds)
        x = {t: f[hop.node_ids[t]] for t, f in self.features.items()}
        return HeteroMiniBatch(hop=hop, x=x, y=self.labels[hop.seed_ids])
