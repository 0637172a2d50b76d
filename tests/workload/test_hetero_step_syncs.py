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

from distgnn_api.spec import Arch
from distgnn_workload.embeddings import RowSparseAdam
from distgnn_workload.runtime.host_syncs import HostSyncCounter
from distgnn_workload.trainer.captured_step import WARMUP_STEPS
from distgnn_workload.trainer.graph_step import HeteroGraphStep
from tests.support.hetero_step import BATCH, HeteroParts

MEASURED_STEPS = 3


class _Setup(HeteroParts):
    """A small MAG-shaped graph, its relational model, typed sampler and fixed-shape step."""

    def __init__(self, device: torch.device, capture: bool) -> None:
        super().__init__(Arch.rsage, device, static_shapes=True)
        graph, model = self.graph, self.model
        self.tables = self.new_tables()
        for table in self.tables:
            table.defer_checks = True  # as on a GPU
        self.step = HeteroGraphStep(
            model,
            torch.optim.Adam(model.parameters(), lr=0.01),
            self.caps,
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
