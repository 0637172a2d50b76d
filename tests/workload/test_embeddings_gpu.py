"""Sharded embeddings on GPUs: NCCL all-to-all of device tensors, counts over gloo, and the
deterministic row sums of the backward and of the owners (``index_put_`` with accumulate)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from tests.support import embedding_ranks as er

pytestmark = pytest.mark.gpu


def _one_gpu_run(device: torch.device) -> torch.Tensor:
    n, dim = 5000, 32
    table = ShardedEmbedding(RowOwnership.single("author", n), dim, RowExchange.local(device))
    opt = RowSparseAdam([table], lr=0.01)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        # heavily repeated ids: many gradient rows summed into each table row
        ids = torch.randint(0, 50, (20000,), generator=g)
        weights = torch.randn(20000, dim, generator=g).to(device)
        (table.lookup(ids) * weights).sum().backward()  # type: ignore[no-untyped-call]
        opt.step()
    return table.weight.cpu()


def test_one_gpu_is_deterministic_and_equals_the_cpu() -> None:
    cuda = torch.device("cuda")
    first, second = _one_gpu_run(cuda), _one_gpu_run(cuda)
    assert torch.equal(first, second), "two runs on one GPU differ"
    torch.testing.assert_close(first, _one_gpu_run(torch.device("cpu")), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_two_gpus_train_like_one_sparse_embedding(tmp_path: Path) -> None:
    ranks = er.run_ranks(tmp_path / "a", "cuda")
    er.check_trains_like_one_sparse_embedding(ranks, atol=1e-5)
    er.check_untouched_rows_keep_their_initial_values(ranks)
    er.check_only_touched_rows_are_sent_read_and_updated(ranks)
    er.check_bf16_rows(ranks)
    er.check_range_error(ranks)
    er.check_resume_is_bit_exact(ranks)
    er.check_one_process_resumes_the_two_ranks_checkpoint(ranks)
    again = er.run_ranks(tmp_path / "b", "cuda")
    for a, b in zip(ranks, again, strict=True):
        for t in er.SIZES:
            assert torch.equal(a["adam"]["weight"][t], b["adam"]["weight"][t]), t


def test_a_shard_in_pinned_host_memory_is_read_and_updated_in_place() -> None:
    """trainers.embeddingMemory over budget: the shard and its Adam state take no GPU memory,
    a step copies nothing between host and device (torch.profiler), and training equals the
    shard on the device, bit for bit."""
    from torch.profiler import ProfilerActivity, profile

    device = torch.device("cuda")
    n, dim = 200_000, 64
    ids = [torch.randint(0, n, (4096,), device=device) for _ in range(4)]
    weights = [torch.randn(4096, dim, device=device) for _ in range(4)]

    def train(host_memory: bool, profiled: bool = False) -> tuple[torch.Tensor, int, list[str]]:
        before = torch.cuda.memory_allocated(device)
        table = ShardedEmbedding(
            RowOwnership.single("author", n),
            dim,
            RowExchange.local(device),
            host_memory=host_memory,
        )
        opt = RowSparseAdam([table], lr=0.01)
        grown = torch.cuda.memory_allocated(device) - before
        (table.lookup(ids[0]) * weights[0]).sum().backward()  # type: ignore[no-untyped-call]
        opt.step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i, w in zip(ids[1:], weights[1:], strict=True):
                (table.lookup(i) * w).sum().backward()  # type: ignore[no-untyped-call]
                opt.step()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()] if profiled else []
        assert table.weight.device.type == "cuda"
        return table.weight.cpu(), grown, names

    on_device, device_grown, _ = train(False)
    on_host, host_grown, names = train(True, profiled=True)
    shard = n * dim * 4 * 3  # rows and two moments
    assert device_grown >= shard
    assert host_grown < shard // 10, host_grown  # the owner maps only
    copies = [x for x in names if "memcpy" in x.lower() and ("HtoD" in x or "DtoH" in x)]
    assert copies == [], copies
    assert torch.equal(on_host, on_device)
