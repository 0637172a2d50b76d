"""The trainer's worker-mode pipeline samples ahead while remote features are on their way."""

from __future__ import annotations

import torch
from torch import Tensor

from distgnn_workload.runtime.batches import LocalPipeline
from distgnn_workload.runtime.features.remote import PendingGather
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
