"""The trainer's worker-mode pipeline samples ahead while remote features are on their way."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from distgnn_workload.runtime.batches import LocalPipeline
from distgnn_workload.runtime.features.pending import PendingGather
from distgnn_workload.sampling import NeighborSampler

CPU = torch.device("cpu")


class _RecordingSource:
    """Features = node id x [1, 2, 3]; logs when each gather starts and is waited for."""

    num_features = 3

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def _rows(self, ids: Tensor) -> Tensor:
        return ids.float().unsqueeze(1) * torch.tensor([1.0, 2.0, 3.0])

    def gather(self, node_ids: Tensor) -> Tensor:
        return self._rows(node_ids)

    def start(self, node_ids: Tensor) -> PendingGather:
        first = int(node_ids[0])
        self.log.append(f"start {first}")
        log = self.log

        class _Pending(PendingGather):
            def wait(self) -> Tensor:
                log.append(f"wait {first}")
                return super().wait()

        return _Pending(self._rows(node_ids))


def test_remote_gathers_are_started_ahead_of_the_batch_being_finished() -> None:
    indptr = torch.arange(0, 201, 2)
    indices = (torch.arange(200) * 7) % 100
    sampler = NeighborSampler(indptr, indices, [2, 2], device=CPU)
    log: list[str] = []
    labels = torch.arange(100) % 3
    pipeline = LocalPipeline(
        sampler, _RecordingSource(log), labels, device=CPU, prefetch=1, lookahead=2
    )
    batches = [(0, torch.arange(10 * i, 10 * i + 10)) for i in range(5)]
    got = list(pipeline.epoch(batches))
    assert [int(b.hop.seed_ids[0]) for b in got] == [0, 10, 20, 30, 40]
    for b in got:
        assert torch.equal(b.x[:, 1], 2 * b.hop.node_ids.float())
        assert torch.equal(b.y, labels[b.hop.seed_ids])
    # batch i is finished only after batches up to i + 2 were sampled and their gathers sent
    assert log.index("start 20") < log.index("wait 0")
    assert log.index("start 40") < log.index("wait 20")
    assert sorted(e for e in log if e.startswith("wait")) == [f"wait {i}" for i in range(0, 50, 10)]


class _LaunchLog:
    """A static sampler whose launches and finishes are logged by their first seed."""

    def __init__(self, sampler: NeighborSampler, log: list[str]) -> None:
        self.sampler = sampler
        self.log = log
        self._first: dict[int, int] = {}

    def sample(self, seeds: Tensor) -> Any:
        raise AssertionError("the pipeline launches batches ahead instead")

    def launch(self, seeds: Tensor) -> Any:
        self.log.append(f"launch {int(seeds[0])}")
        launched = self.sampler.launch(seeds)
        self._first[id(launched)] = int(seeds[0])
        return launched

    def finish(self, launched: Any) -> Any:
        self.log.append(f"finish {self._first.pop(id(launched))}")
        return self.sampler.finish(launched)


def test_sampling_is_launched_a_batch_ahead_of_the_sizes_read_back() -> None:
    """The sizes of batch j are read only after batch j + 1 was queued: the loader never
    waits for the sampling it just queued. The batches equal those sampled one by one."""
    indptr = torch.arange(0, 201, 2)
    indices = (torch.arange(200) * 7) % 100
    log: list[str] = []

    def sampler() -> NeighborSampler:
        return NeighborSampler(indptr, indices, [2, 2], device=CPU, static_shapes=True, seed=4)

    labels = torch.arange(100) % 3
    pipeline = LocalPipeline(
        _LaunchLog(sampler(), log),  # type: ignore[arg-type]
        _RecordingSource(log),
        labels,
        device=CPU,
        prefetch=1,
        lookahead=2,
    )
    batches = [(0, torch.arange(10 * i, 10 * i + 10)) for i in range(6)]
    got = list(pipeline.epoch(batches))
    reference = sampler()
    for (_, seeds), b in zip(batches, got, strict=True):
        want = reference.sample(seeds)
        assert torch.equal(b.hop.node_ids, want.node_ids)
        assert torch.equal(b.hop.edge_index, want.edge_index)
        assert torch.equal(b.x[:, 1], 2 * b.hop.node_ids.float())
    for j in range(0, 50, 10):  # every batch but the last has a successor
        assert log.index(f"launch {j + 10}") < log.index(f"finish {j}")
        assert log.index(f"finish {j}") < log.index(f"start {j}")
    assert log.index("launch 30") < log.index("wait 0")  # three batches ahead of the one done
    assert [e for e in log if e.startswith("launch")] == [f"launch {i}" for i in range(0, 60, 10)]
