"""The typed worker-mode pipeline's lookahead: where a featured type's rows come over the
feature exchange, batches are sampled and their rounds started ahead of the batch being
finished; the batches are the same, in the same order, as without it. A counting pipeline's
batches carry their nodes per owner (what a step checks against its embedding blocks)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.runtime.batches import FIT_STREAM, HeteroPipeline
from distgnn_workload.runtime.features.cache_policy import whole_tables
from distgnn_workload.runtime.features.pending import PendingGather
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.seeds import stream_seed
from distgnn_workload.runtime.training_data import (
    HeteroTrainingData,
    contiguous_book,
    from_graph,
)

CPU = torch.device("cpu")
BATCH = 16


@pytest.fixture(scope="module")
def data() -> HeteroTrainingData:
    graph = generate_mag(SyntheticHeteroConfig(scale=0.002, num_classes=5, seed=4))
    return from_graph(graph, contiguous_book(graph.node_counts, 1), 1)


class CountingSource:
    """A typed source whose rows count as exchanged: it counts the gathers started."""

    def __init__(self, data: HeteroTrainingData, exchanged: bool) -> None:
        self.source = TypedFeatureSource(whole_tables(data.x, CPU))
        self.started = 0
        self.phases = 0
        self._exchanged = exchanged

    @property
    def exchanged(self) -> bool:
        return self._exchanged

    def start(self, node_type: str, ids: Tensor) -> PendingGather:
        self.started += 1
        return self.source.start(node_type, ids)

    def finish_phase(self) -> None:
        self.phases += 1


def _fanouts(data: HeteroTrainingData) -> dict[EdgeType, list[int]]:
    return {et: [4, 2] for et in data.edge_types}


@pytest.mark.parametrize("exchanged", [True, False])
def test_the_lookahead_starts_batches_ahead_and_keeps_them_the_same(
    data: HeteroTrainingData, exchanged: bool
) -> None:
    seeds = data.train_ids[0]
    batches = [(0, seeds[i * BATCH : (i + 1) * BATCH]) for i in range(5)]
    plain = HeteroPipeline(data, _fanouts(data), rank=0, seed=1, device=CPU, depth=0)
    source = CountingSource(data, exchanged)
    ahead = HeteroPipeline(
        data, _fanouts(data), rank=0, seed=1, device=CPU, depth=0, lookahead=2, features=source
    )
    expected = list(plain.epoch(batches, epoch=0))
    types = len(data.x)
    started_by_batch = []
    got = []
    for batch in ahead.epoch(batches, epoch=0):
        started_by_batch.append(source.started // types)
        got.append(batch)
    # with the exchange, batch i + 2 was sampled and started when batch i was handed over
    ahead_by = 2 if exchanged else 0
    assert started_by_batch == [min(i + 1 + ahead_by, 5) for i in range(5)]
    assert source.phases == 1  # the phase ended once, after its last batch
    assert len(got) == len(expected) == 5
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a.y, b.y)
        for t in a.hop.node_ids:
            assert torch.equal(a.hop.node_ids[t], b.hop.node_ids[t]), t
        for t in a.x:
            assert torch.equal(a.x[t], b.x[t]), t


def test_counted_batches_carry_their_nodes_per_owner_and_the_peaks_are_the_largest(
    data: HeteroTrainingData,
) -> None:
    """A counting pipeline hands every batch its nodes of each counted type per owner (the
    counter's, on the host, with and without the lookahead), and ``owner_peaks`` gives the
    most one owner held in one batch of the ones it is given."""
    seeds = data.train_ids[0]
    batches = [(0, seeds[i * BATCH : (i + 1) * BATCH]) for i in range(4)]
    owned = {t: torch.arange(n) % 3 for t, n in data.node_counts.items()}  # 3 owners

    def counter(t: str):  # type: ignore[no-untyped-def]
        return lambda ids: torch.bincount(owned[t][ids], minlength=3)

    counted = ["author", "field_of_study"]
    for exchanged in (True, False):
        pipeline = HeteroPipeline(
            data,
            _fanouts(data),
            rank=0,
            seed=1,
            device=CPU,
            depth=0,
            lookahead=2,
            features=CountingSource(data, exchanged),
        )
        assert all(b.owner_counts is None for b in pipeline.epoch(batches, epoch=0))
        pipeline.count_owners({t: counter(t) for t in counted})
        got = list(pipeline.epoch(batches, epoch=0))
        for batch in got:
            assert batch.owner_counts is not None
            assert list(batch.owner_counts) == counted
            for t in counted:
                ids = batch.hop.node_ids[t]
                want = [int((owned[t][ids] == r).sum()) for r in range(3)]
                assert batch.owner_counts[t] == want, (t, batch.owner_counts[t], want)
                assert sum(want) == ids.numel() > 0
        peaks = pipeline.owner_peaks([s for _, s in batches])
        # the same batches sampled again from the fitting stream (as the caps are fitted)
        pipeline.sampler.reseed(stream_seed(1, FIT_STREAM, 0))
        again = [pipeline.sampler.sample(s) for _, s in batches]
        assert peaks == {
            t: max(int(torch.bincount(owned[t][h.node_ids[t]], minlength=3).max()) for h in again)
            for t in counted
        }
