"""The typed training step of one rank reads nothing back from the device once warmed up.

On CPU, :class:`HostSyncCounter` records every call of an operation that reads device data
back (``.item()``, ``.tolist()``, ``torch.unique``, boolean masks, ...) while fixed-shape
steps with learnt embeddings and row-sparse Adam run, as on a GPU (the embeddings' range
check left on the device): there must be none. The typed sampler's static execution reads
its sizes back once per batch. On a GPU (``gpu`` tier) the captured steps run under
``torch.cuda.set_sync_debug_mode("error")``, which fails on any synchronising CUDA call.
"""

from __future__ import annotations

import pytest
import torch

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.models import build_hetero_model
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.runtime.host_syncs import HostSyncCounter
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.static_sample import StaticCaps
from distgnn_workload.trainer.captured_step import WARMUP_STEPS
from distgnn_workload.trainer.graph_step import HeteroGraphStep

FANOUTS = (4, 3)
BATCH = 64
DIM = 8
MEASURED_STEPS = 3


class _Setup:
    """A small MAG-shaped graph, its relational model, typed sampler and fixed-shape step."""

    def __init__(self, device: torch.device, capture: bool) -> None:
        graph = generate_mag(
            SyntheticHeteroConfig(scale=0.002, seed=1, num_classes=5, num_features=12)
        )
        self.graph = graph
        target = graph.target_node_type
        self.features = {t: torch.from_numpy(x).to(device) for t, x in graph.x.items()}
        widths = {t: x.size(1) for t, x in self.features.items()}
        widths |= dict.fromkeys(graph.featureless_types, DIM)
        spec = ModelSpec(
            arch=Arch.rsage, hidden_channels=16, num_layers=2, fanout=list(FANOUTS), dropout=0.0
        )
        torch.manual_seed(0)
        model = build_hetero_model(
            spec, graph.node_types, graph.edge_types, widths, graph.num_classes, target
        ).to(device)
        assert isinstance(model, RelationalGNN)
        self.sampler = HeteroNeighborSampler(
            graph.in_csr,
            graph.node_counts,
            list(FANOUTS),
            seed_type=target,
            seed=3,
            device=device,
            static_shapes=True,
        )
        self.labels = torch.from_numpy(graph.y).to(device)
        exchange = RowExchange.local(device)
        self.tables = [
            ShardedEmbedding(RowOwnership.single(t, graph.node_counts[t]), DIM, exchange, seed=5)
            for t in graph.featureless_types
        ]
        for table in self.tables:
            table.defer_checks = True  # as on a GPU
        caps = StaticCaps.bounds(
            graph.node_counts,
            graph.edge_types,
            {et: list(FANOUTS) for et in graph.edge_types},
            target,
            BATCH,
        )
        self.step = HeteroGraphStep(
            model,
            torch.optim.Adam(model.parameters(), lr=0.01),
            caps,
            graph.edge_types,
            features={t: (f.size(1), f.dtype) for t, f in self.features.items()},
            tables=self.tables,
            sparse=RowSparseAdam(self.tables, lr=0.01),
            device=device,
            bf16=False,
            world_size=1,
            capture=capture,
        )
        self.train = torch.from_numpy(graph.train_mask).nonzero().flatten()

    def seeds(self, i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(i)
        size = BATCH if i % 2 == 0 else BATCH // 2 + i
        return self.train[torch.randperm(self.train.numel(), generator=g)[:size]]

    def batch(self, seeds: torch.Tensor) -> HeteroMiniBatch:
        hop = self.sampler.sample(seeds)
        x = {t: f[hop.node_ids[t]] for t, f in self.features.items()}
        return HeteroMiniBatch(hop=hop, x=x, y=self.labels[hop.seed_ids])


def test_warm_typed_steps_with_embeddings_read_nothing_back_cpu() -> None:
    setup = _Setup(torch.device("cpu"), capture=False)
    batches = [setup.batch(setup.seeds(i)) for i in range(WARMUP_STEPS + MEASURED_STEPS)]
    weights = [t.weight.clone() for t in setup.tables]
    for batch in batches[:WARMUP_STEPS]:
        setup.step.step(batch)
    with HostSyncCounter() as syncs:
        losses = [setup.step.step(batch) for batch in batches[WARMUP_STEPS:]]
    assert syncs.count == 0, "host syncs in the typed step:\n" + syncs.summary()
    assert all(bool(torch.isfinite(loss)) for loss in losses)
    for table, before in zip(setup.tables, weights, strict=True):
        assert not torch.equal(table.weight, before), f"{table.node_type}: nothing was trained"
    rows, remote = setup.tables[0].take_counts()  # the counts wait on the device until read
    assert rows > 0
    assert remote == 0


def test_the_typed_sampler_reads_its_sizes_back_once_per_batch_cpu() -> None:
    setup = _Setup(torch.device("cpu"), capture=False)
    setup.batch(setup.seeds(0))
    with HostSyncCounter() as syncs:
        for i in range(1, 4):
            setup.sampler.sample(setup.seeds(i))
    sites = {(s.op, s.where.split(":")[0]) for s in syncs.calls}
    # the seeds' range check runs on the host seeds; the sizes are the one read-back
    assert sites == {
        ("__bool__", "sampling/csr.py"),
        ("tolist", "sampling/neighbor_sampler.py"),
    }, syncs.summary()
    assert syncs.count == 2 * 3


@pytest.mark.gpu
def test_captured_typed_steps_with_embeddings_do_not_sync_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    setup = _Setup(torch.device("cuda"), capture=True)
    setup.sampler.prepare(BATCH)
    warm = WARMUP_STEPS + 2  # eager warm-up, the capture, one replay
    batches = [setup.batch(setup.seeds(i)) for i in range(warm + MEASURED_STEPS)]
    for batch in batches[:warm]:
        setup.step.step(batch)
    assert setup.step.graph is not None, "the step was not captured"
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with HostSyncCounter() as syncs:
            losses = [setup.step.step(batch) for batch in batches[warm:]]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert syncs.count == 0, syncs.summary()
    assert all(bool(torch.isfinite(loss)) for loss in losses)
    assert setup.tables[0].take_counts()[0] > 0
