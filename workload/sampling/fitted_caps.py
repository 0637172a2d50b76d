"""The static execution's buffers fitted to the batches a typed sampler draws.

The bounds of a typed graph (:class:`~distgnn_workload.sampling.static_sample.StaticCaps`)
are far above what a batch holds: most nodes have fewer neighbours than the fanout, and
nodes repeat. Every kernel of the static run, and of a fixed-shape training step sized by
the same caps, works on the caps, so a sampler fits them to its first batches
(:meth:`FittedCaps.fit`: the largest sizes seen, with headroom). A later batch over them is
sampled again by the exact dynamic execution, and counted (``overflows``); the step runs
such a batch eagerly. Batches stay exact either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import TypedCSR
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.static_sample import StaticCaps

TypedKey = tuple[str, int]
"""A typed sampler's captured run: the seed type and the batch capacity."""


class FittedCaps:
    """Mixed into :class:`~distgnn_workload.sampling.HeteroNeighborSampler`: its caps per
    seed type, fitted to sampled batches."""

    graph: TypedCSR
    fanouts: dict[EdgeType, list[int]]
    device: torch.device
    static_shapes: bool
    _graphs: dict[Any, Any]

    def _resolve(self, seed_type: str | None) -> str:
        raise NotImplementedError

    def _reset_tables(self) -> None:
        raise NotImplementedError

    def _sample_dynamic(self, seeds: Mapping[str, Tensor], seed_type: str) -> HeteroHopBatch:
        raise NotImplementedError

    def _start_fitting(self) -> None:
        self._fitted: dict[str, StaticCaps] = {}
        self.overflows = 0
        """Batches that exceeded the fitted caps and were sampled again, exactly."""

    def fit(
        self,
        seed_batches: Sequence[Tensor],
        seed_type: str | None = None,
        **fit_args: Any,
    ) -> StaticCaps | None:
        """Fit the caps of ``seed_type`` to batches like ``seed_batches`` (all of one size,
        the batch capacity), each sampled exactly; returns them (None: no static execution).
        ``fit_args``: :meth:`StaticCaps.fitted`'s headroom, slack and multiple. Draws from
        the random stream: reseed after."""
        seed_type = self._resolve(seed_type)
        if not self.static_shapes or not seed_batches:
            return None
        capacity = max(int(s.numel()) for s in seed_batches)
        batches = []
        for seeds in seed_batches:
            seeds = seeds.reshape(-1).to(torch.int64)
            self.graph.check_seeds(seeds, seed_type)
            batches.append(self._sample_dynamic({seed_type: seeds.to(self.device)}, seed_type))
        caps = self.bounds(capacity, seed_type).fitted(batches, self.fanouts, **fit_args)
        self._fitted[seed_type] = caps
        self._graphs.pop((seed_type, capacity), None)
        return caps

    def bounds(self, capacity: int, seed_type: str | None = None) -> StaticCaps:
        """The static execution's bounds for batches of up to ``capacity`` seeds."""
        return StaticCaps.of(self.graph, self.fanouts, self._resolve(seed_type), capacity)

    def caps(self, seed_type: str | None = None) -> StaticCaps | None:
        """The fitted caps of ``seed_type`` (:meth:`fit`), if any."""
        return self._fitted.get(self._resolve(seed_type))

    def _caps_of(self, key: TypedKey) -> StaticCaps | None:
        """The fitted caps of a run, if it has some (fitted to its batch capacity)."""
        caps = self._fitted.get(key[0])
        return caps if caps is not None and caps.nodes[key[0]][0] == key[1] else None

    def _past_caps(self, key: TypedKey, sizes: Sequence[int]) -> bool:
        """Whether a run's sizes (read back) went past its fitted caps: then its writes went
        to dump slots and the relabel tables are dirty, so they are reset here."""
        caps = self._caps_of(key)
        if caps is None or not caps.exceeded_by(sizes):
            return False
        self._reset_tables()
        self.overflows += 1
        return True
