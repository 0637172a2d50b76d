"""Sharded embeddings in one process: ownership, initial rows, the optimizers against torch's
own, and the checkpoint shards (round trip, pruning, refusals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from distgnn_api.feature_memory import ADAM_STATE_ROWS
from distgnn_workload.embeddings import (
    LookupRangeError,
    OwnershipError,
    RowExchange,
    RowOwnership,
    RowSparseAdagrad,
    RowSparseAdam,
    RowSparseOptimizer,
    ShardedEmbedding,
    initial_rows,
    load_shards,
    save_shards,
    shard_path,
)
from distgnn_workload.embeddings import init_rows as init_rows_module
from distgnn_workload.embeddings.placement import host_shards, shard_bytes
from distgnn_workload.runtime.checkpoint import CheckpointError

N, DIM = 40, 5


def _table(seed: int = 0, node_type: str = "author") -> ShardedEmbedding:
    return ShardedEmbedding(RowOwnership.single(node_type, N), DIM, RowExchange.local(), seed=seed)


def _lookups(steps: int) -> list[Tensor]:
    g = torch.Generator().manual_seed(11)
    return [torch.randint(0, N, (17,), generator=g) for _ in range(steps)]


def _target() -> Tensor:
    return torch.randn(N, DIM, generator=torch.Generator().manual_seed(5))


def _train(table: ShardedEmbedding, opt: RowSparseOptimizer, lookups: list[Tensor]) -> None:
    target = _target()
    for ids in lookups:
        out = table.lookup(ids)
        ((out - target[ids]) ** 2).sum().backward()  # type: ignore[no-untyped-call]
        opt.step()


# ---------------------------------------------------------------------- ownership


def test_partition_book_gives_each_partitions_rows_to_its_ranks_in_blocks() -> None:
    book = np.array([2, 0, 2, 1, 2, 2, 0, 2], dtype=np.int32)
    own = RowOwnership.from_partition_book("author", book, [[0], [1], [2, 3]], 4)
    assert own.owner.tolist() == [2, 0, 2, 1, 2, 3, 0, 3]  # partition 2: 3 rows, then 2
    assert own.shard_sizes == [2, 1, 3, 2]
    assert own.rows_of(3).tolist() == [5, 7]
    # a row's place in its owner's shard
    for rank in range(4):
        rows = own.rows_of(rank)
        assert own.local[rows].tolist() == list(range(rows.numel()))


def test_ownership_errors_name_the_type_and_the_fix() -> None:
    with pytest.raises(OwnershipError, match=r"'author'.*node 2 is owned by rank 5"):
        RowOwnership("author", [0, 1, 5], 2)
    with pytest.raises(OwnershipError, match=r"'field_of_study'.*partition 1 has 2 nodes"):
        RowOwnership.from_partition_book("field_of_study", [0, 1, 1], [[0], []], 1)
    with pytest.raises(OwnershipError, match=r"'author'.*ranks are given for 2 partitions"):
        RowOwnership.from_partition_book("author", [0, 3], [[0], [1]], 2)
    with pytest.raises(OwnershipError, match="integer ranks"):
        RowOwnership("author", np.array([0.0, 1.0]), 2)


def test_contiguous_ownership_is_balanced() -> None:
    own = RowOwnership.contiguous("author", 10, 3)
    assert own.shard_sizes == [4, 3, 3]
    assert own.owner.tolist() == sorted(own.owner.tolist())


def test_initial_rows_depend_on_the_id_not_on_the_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(init_rows_module, "INIT_CHUNK_ROWS", 7)  # several chunks
    full = initial_rows(1, "author", torch.arange(30), DIM)
    some = torch.tensor([0, 6, 7, 13, 29])
    assert torch.equal(initial_rows(1, "author", some, DIM), full[some])
    assert not torch.equal(initial_rows(2, "author", some, DIM), full[some])
    assert not torch.equal(initial_rows(1, "paper", some, DIM), full[some])


def test_an_exchange_over_several_ranks_needs_a_process_group() -> None:
    with pytest.raises(RuntimeError, match="initialise the trainers' process group"):
        RowExchange(0, 2, torch.device("cpu"))


# ---------------------------------------------------------------------- optimizers


def test_row_sparse_adam_is_torch_sparse_adam() -> None:
    lookups = _lookups(8)
    table = _table()
    _train(table, RowSparseAdam([table], lr=0.03), lookups)
    ref = nn.Embedding(N, DIM, sparse=True)
    with torch.no_grad():
        ref.weight.copy_(initial_rows(0, "author", torch.arange(N), DIM))
    opt = torch.optim.SparseAdam(ref.parameters(), lr=0.03)
    target = _target()
    for ids in lookups:
        opt.zero_grad()
        ((ref(ids) - target[ids]) ** 2).sum().backward()
        opt.step()  # type: ignore[no-untyped-call]
    assert torch.allclose(table.weight, ref.weight.detach(), rtol=1e-6, atol=1e-7)
    assert table.stats.as_dict()["rows_updated"] == sum(torch.unique(i).numel() for i in lookups)


def test_row_sparse_adagrad_is_torch_adagrad_on_sparse_gradients() -> None:
    lookups = _lookups(8)
    table = _table()
    opt = RowSparseAdagrad([table], lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1)
    _train(table, opt, lookups)
    ref = nn.Embedding(N, DIM, sparse=True)
    with torch.no_grad():
        ref.weight.copy_(initial_rows(0, "author", torch.arange(N), DIM))
    ref_opt = torch.optim.Adagrad(
        ref.parameters(), lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1
    )
    target = _target()
    for ids in lookups:
        ref_opt.zero_grad()
        ((ref(ids) - target[ids]) ** 2).sum().backward()
        ref_opt.step()
    assert torch.allclose(table.weight, ref.weight.detach(), rtol=1e-6, atol=1e-7)
    state = ref_opt.state[ref.weight]
    assert torch.allclose(opt.state["author"].rows["sum"], state["sum"], rtol=1e-6)


def test_a_lookup_with_ids_of_another_shape_keeps_the_shape() -> None:
    table = _table()
    ids = torch.tensor([[1, 2, 1], [0, 3, 3]])
    out = table.lookup(ids)
    assert out.shape == (2, 3, DIM)
    assert torch.equal(out[1, 2], table.weight[3])
    out.sum().backward()  # type: ignore[no-untyped-call]
    reduced = table.reduce_grads()
    assert reduced is not None
    rows, grad = reduced
    assert rows.tolist() == [0, 1, 2, 3]
    assert grad[:, 0].tolist() == [1.0, 2.0, 1.0, 2.0]  # repeats summed


def test_an_out_of_range_id_names_the_node_type() -> None:
    table = _table(node_type="institution")
    with pytest.raises(LookupRangeError, match=r"'institution'.*outside 0\.\.39 \(e\.g\. -1\)"):
        table.lookup(torch.tensor([3, -1]))
    with pytest.raises(LookupRangeError, match=r"'institution'.*e\.g\. 40"):
        table.lookup(torch.tensor([40]))


def test_lookups_without_grad_leave_nothing_to_step() -> None:
    table = _table()
    opt = RowSparseAdam([table])
    before = table.weight.clone()
    with torch.no_grad():
        table.lookup(torch.tensor([1, 2]))
    opt.step()
    assert opt.state["author"].step == 0
    assert torch.equal(table.weight, before)


# ---------------------------------------------------------------------- checkpoints


def _state(table: ShardedEmbedding, opt: RowSparseOptimizer) -> dict[str, Any]:
    return {"weight": table.weight.clone(), "opt": opt.state_dict()}


def _assert_same_rows(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The two ``_state`` hold the same rows and the same Adam moments of every row."""
    assert torch.equal(a["weight"], b["weight"])
    for key in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(
            a["opt"]["tables"]["author"]["rows"][key], b["opt"]["tables"]["author"]["rows"][key]
        )


def test_resume_in_one_process_is_bit_exact(tmp_path: Path) -> None:
    lookups = _lookups(7)
    straight = _table()
    straight_opt = RowSparseAdam([straight], lr=0.03)
    _train(straight, straight_opt, lookups)
    first = _table()
    first_opt = RowSparseAdam([first], lr=0.03)
    _train(first, first_opt, lookups[:4])
    save_shards(tmp_path, 4, [first], first_opt)
    resumed = _table(seed=9)
    resumed_opt = RowSparseAdam([resumed], lr=0.03)
    load_shards(tmp_path, 4, [resumed], resumed_opt)
    _train(resumed, resumed_opt, lookups[4:])
    a, b = _state(straight, straight_opt), _state(resumed, resumed_opt)
    _assert_same_rows(a, b)
    assert a["opt"]["tables"]["author"]["step"] == b["opt"]["tables"]["author"]["step"] == 7


def test_old_shards_are_pruned_beyond_keep(tmp_path: Path) -> None:
    table = _table()
    opt = RowSparseAdam([table])
    for epoch in range(1, 6):
        save_shards(tmp_path, epoch, [table], opt, keep=2)
    folders = sorted(p.name for p in shard_path(tmp_path, 5, 0, 1).parent.parent.iterdir())
    assert folders == ["epoch-4", "epoch-5"]


def test_loading_refuses_missing_or_foreign_shards(tmp_path: Path) -> None:
    table = _table()
    opt = RowSparseAdam([table])
    with pytest.raises(CheckpointError, match=r"no complete set of embedding shards for epoch 3"):
        load_shards(tmp_path, 3, [table], opt)
    save_shards(tmp_path, 3, [table], opt)
    other = ShardedEmbedding(RowOwnership.single("author", N + 1), DIM, RowExchange.local())
    with pytest.raises(
        CheckpointError, match=r"'author' was saved with \(rows, dim\) \[\(40, 5\)\]"
    ):
        load_shards(tmp_path, 3, [other], RowSparseAdam([other]))
    with pytest.raises(CheckpointError, match=r"'adam'.*'adagrad'"):
        load_shards(tmp_path, 3, [table], RowSparseAdagrad([table]))
    second = _table(node_type="institution")
    with pytest.raises(CheckpointError, match=r"\['author'\].*\['author', 'institution'\]"):
        load_shards(tmp_path, 3, [table, second], RowSparseAdam([table, second]))


# ---------------------------------------------------------------------- placement


def test_a_shard_in_host_memory_trains_and_resumes_as_one_on_the_device(tmp_path: Path) -> None:
    """The shard and its Adam state in aligned host rows (trainers.embeddingMemory over
    budget): lookups, updates and the checkpoint round trip equal the device shard's."""
    lookups = _lookups(7)
    device = _table()
    device_opt = RowSparseAdam([device], lr=0.03)
    _train(device, device_opt, lookups)

    def host_table(seed: int = 0) -> ShardedEmbedding:
        own = RowOwnership.single("author", N)
        return ShardedEmbedding(own, DIM, RowExchange.local(), seed=seed, host_memory=True)

    first = host_table()
    first_opt = RowSparseAdam([first], lr=0.03)
    # 5 fp32 columns in rows aligned to 128 bytes: the shard is a strided view of them
    assert first.weight.stride(0) * first.weight.element_size() % 128 == 0
    assert first.weight.stride(0) > DIM
    assert first_opt.state["author"].rows["exp_avg"].stride(0) > DIM
    _train(first, first_opt, lookups[:4])
    save_shards(tmp_path, 4, [first], first_opt)
    resumed = host_table(seed=9)
    resumed_opt = RowSparseAdam([resumed], lr=0.03)
    load_shards(tmp_path, 4, [resumed], resumed_opt)
    assert resumed.weight.stride(0) > DIM  # loaded in place: the rows stay where they live
    _train(resumed, resumed_opt, lookups[4:])
    a, b = _state(device, device_opt), _state(resumed, resumed_opt)
    _assert_same_rows(a, b)


def test_the_smallest_shards_stay_on_the_gpu_within_the_budget() -> None:
    assert host_shards([300, 100, 200], None) == [False, False, False]
    assert host_shards([300, 100, 200], 300) == [True, False, False]
    assert host_shards([300, 100, 200], 299) == [True, False, True]
    assert host_shards([300, 100, 200], 0) == [True, True, True]
    assert host_shards([300, 100, 200], 600) == [False, False, False]
    # rows and Adam's two moments, fp32
    assert shard_bytes(rows=10, dim=8, state_rows=RowSparseAdam.state_rows) == 10 * 8 * 4 * 3
    # distgnn plan sizes the shards with the trainer's optimizer state
    assert RowSparseAdam.state_rows == ADAM_STATE_ROWS
