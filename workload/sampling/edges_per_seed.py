"""Sampled edges per seed, per edge type: what compares two samplers' work (e.g. ours vs PyG)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import type_key
from distgnn_workload.sampling.hop_batch import HeteroHopBatch


class SampledEdgesPerSeed:
    """Accumulates sampled edges per edge type and seeds over batches; reports their ratio.

    Feed it our batches (:meth:`add_batch`), PyG ``HeteroData`` mini-batches
    (:meth:`add_pyg`) or raw counts (:meth:`add`). Reports are keyed ``src__rel__dst``.
    """

    def __init__(self) -> None:
        self.edges: dict[EdgeType, int] = {}
        self.seeds = 0

    def add(self, num_edges: Mapping[EdgeType, int], num_seeds: int) -> None:
        for edge_type, count in num_edges.items():
            self.edges[edge_type] = self.edges.get(edge_type, 0) + int(count)
        self.seeds += int(num_seeds)

    def add_batch(self, batch: HeteroHopBatch) -> None:
        self.add({et: sum(e) for et, e in batch.num_edges_per_hop.items()}, batch.num_seeds)

    def add_pyg(self, data: Any, seed_type: str) -> None:
        """A ``HeteroData`` batch of ``NodeLoader``/``NeighborLoader`` seeded on ``seed_type``."""
        edges = {et: int(data[et].edge_index.size(1)) for et in data.edge_types}
        self.add(edges, int(data[seed_type].batch_size))

    def per_seed(self) -> dict[str, float]:
        """Sampled edges per seed of each edge type (0.0 before any seed)."""
        seeds = max(self.seeds, 1)
        return {type_key(et): n / seeds for et, n in sorted(self.edges.items())}

    def total_per_seed(self) -> float:
        """Sampled edges per seed over all edge types."""
        return sum(self.edges.values()) / max(self.seeds, 1)


def relative_differences(
    ours: Mapping[str, float], reference: Mapping[str, float]
) -> dict[str, float]:
    """``|ours - reference| / reference`` per key of either (inf where only one has edges)."""
    out = {}
    for key in sorted(set(ours) | set(reference)):
        a, b = ours.get(key, 0.0), reference.get(key, 0.0)
        out[key] = abs(a - b) / b if b else (0.0 if a == 0 else float("inf"))
    return out
