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
