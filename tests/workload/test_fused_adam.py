"""The fused row-sparse Adam (:mod:`distgnn_workload.embeddings.fused_adam`) against
:class:`RowSparseAdam`'s tensor operations: in Triton's interpreter (a process of its own),
and on a GPU, eagerly and replayed from a CUDA graph (gpu tier). On by default: an optimizer
made without ``fused`` takes the kernel where the rows are in a GPU's memory."""

from __future__ import annotations

import os

import pytest
import torch

from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from distgnn_workload.embeddings import optim as optim_module
from distgnn_workload.embeddings.fused_adam import fused_adam_available
from distgnn_workload.embeddings.routes import Touched
from tests.support.interpreted import run_interpreted


def test_the_kernel_is_the_default_and_host_rows_take_the_tensor_operations() -> None:
    table = ShardedEmbedding(RowOwnership.single("t", 10), 4, RowExchange.local(), seed=1)
    assert optim_module.FUSED_ADAM is True
    assert RowSparseAdam([table]).fused is True
    assert RowSparseAdam([table], fused=False).fused is False
    # rows on the host take the tensor operations, fused or not, outside Triton's interpreter
    if os.environ.get("TRITON_INTERPRET", "0") == "0":
        assert not fused_adam_available(table.weight)


@pytest.mark.slow
def test_the_kernel_in_tritons_interpreter_equals_the_tensor_operations() -> None:
    pytest.importorskip("triton")
    run_interpreted("fused_adam_check.py", "the kernel equals the tensor operations")


def _gpu_pair(rows: int, width: int) -> dict[bool, tuple[ShardedEmbedding, RowSparseAdam]]:
    device = torch.device("cuda")
    out = {}
    for fused in (False, True):
        table = ShardedEmbedding(
            RowOwnership.single("t", rows), width, RowExchange.local(device), seed=4
        )
        out[fused] = (table, RowSparseAdam([table], lr=0.01, fused=fused))
    return out


def _touched(rows: int, slots: int, count: int, width: int, seed: int) -> Touched:
    g = torch.Generator(device="cuda").manual_seed(seed)
    picked = torch.randperm(rows, device="cuda", generator=g)[:slots]
    picked[count:] = picked[count - 1]
    grad = torch.randn(slots, width, device="cuda", generator=g)
    return Touched(picked, grad, torch.tensor(count, device="cuda"))


def _step(opt: RowSparseAdam, table: ShardedEmbedding, touched: Touched) -> None:
    st = opt.state["t"]
    st.counter.add_(1)
    opt._update(table, touched, st)


@pytest.mark.gpu
def test_the_kernel_on_the_gpu_equals_the_tensor_operations_also_in_a_cuda_graph() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    rows, width, slots = 200_000, 128, 60_000
    pair = _gpu_pair(rows, width)
    assert fused_adam_available(pair[True][0].weight)
    for seed, count in ((0, 50_000), (1, 60_000), (2, 1)):
        touched = _touched(rows, slots, count, width, seed)
        for table, opt in pair.values():
            _step(opt, table, touched)
    torch.cuda.synchronize()
    (plain, p_opt), (fused, f_opt) = pair[False], pair[True]
    for name in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(
            f_opt.state["t"].rows[name], p_opt.state["t"].rows[name], rtol=1e-6, atol=1e-7
        )
    torch.testing.assert_close(fused.weight, plain.weight, rtol=1e-6, atol=1e-7)
    # captured once, replayed with new gradients in the same buffers
    touched = _touched(rows, slots, 40_000, width, 3)
    _step(f_opt, fused, touched)  # warm-up outside the capture
    _step(p_opt, plain, touched)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _step(f_opt, fused, touched)
    for seed in (4, 5):
        fresh = _touched(rows, slots, 40_000, width, seed)
        touched.rows.copy_(fresh.rows)
        touched.grad.copy_(fresh.grad)
        graph.replay()
        _step(p_opt, plain, fresh)
    torch.cuda.synchronize()
    torch.testing.assert_close(fused.weight, plain.weight, rtol=1e-5, atol=1e-6)
    assert float(f_opt.state["t"].counter) == float(p_opt.state["t"].counter)
