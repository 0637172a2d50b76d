"""Models on sampled HopBatches: forward/backward, and trimming equals the untrimmed result."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pytest
import torch
from torch import nn
from torch_geometric.nn import SAGEConv

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.models import build_model
from distgnn_workload.models.aggregation import (
    mean_aggregate,
    mean_aggregate_scatter,
    mean_aggregate_segment,
)
from distgnn_workload.sampling import HopBatch, NeighborSampler, csc_from_edge_index

FANOUTS = [5, 4, 3]


def sampled_batch(seed: int = 0, num_nodes: int = 400) -> tuple[HopBatch, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, 8 * num_nodes), generator=g)
    indptr, indices = csc_from_edge_index(edge_index, num_nodes)
    sampler = NeighborSampler(indptr, indices, FANOUTS, device="cpu", seed=seed)
    hop = sampler.sample(torch.randperm(num_nodes, generator=g)[:24])
    x = torch.randn(hop.num_nodes, 12, generator=g)
    return hop, x


def full_forward(
    convs: Sequence[nn.Module],
    x: torch.Tensor,
    hop: HopBatch,
    act: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """The untrimmed computation: every layer over every sampled node and edge."""
    h = x
    for layer, conv in enumerate(convs):
        h = conv(h, hop.edge_index)
        if layer < len(convs) - 1:
            h = act(h)
    return h[: hop.num_seeds]


@pytest.mark.parametrize("arch", ["sage", "gcn", "gat"])
def test_forward_backward(arch: str) -> None:
    hop, x = sampled_batch()
    model = build_model(ModelSpec(arch=Arch(arch), hidden_channels=16, heads=2), 12, 5)
    out = model(x, hop)
    assert out.shape == (hop.num_seeds, 5)
    assert bool(torch.isfinite(out).all())
    loss = torch.nn.functional.cross_entropy(out, torch.zeros(hop.num_seeds, dtype=torch.long))
    torch.autograd.backward(loss)
    for name, param in model.named_parameters():
        assert param.grad is not None, f"{arch}: no gradient for {name}"
        assert bool(param.grad.abs().sum() > 0), f"{arch}: zero gradient for {name}"


def test_sage_trimmed_equals_untrimmed_pyg_sageconv() -> None:
    hop, x = sampled_batch(seed=1)
    model = build_model(ModelSpec(arch=Arch.sage, hidden_channels=16), 12, 5).eval()
    reference = []
    for layer in model.convs:  # type: ignore[union-attr]
        conv = SAGEConv(layer.lin_l.in_features, layer.lin_l.out_features, aggr="mean")
        conv.load_state_dict(layer.state_dict())
        reference.append(conv)
    want = full_forward(reference, x, hop, torch.relu)
    got = model(x, hop)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_sage_without_target_ptr_and_with_scatter_aggregation() -> None:
    hop, x = sampled_batch(seed=2)
    model = build_model(ModelSpec(arch=Arch.sage, hidden_channels=16), 12, 5).eval()
    want = model(x, hop)
    bare = dataclasses.replace(hop, target_ptr=None)
    torch.testing.assert_close(model(x, bare), want)
    model.aggregation = "scatter"  # type: ignore[assignment]
    torch.testing.assert_close(model(x, hop), want, rtol=1e-5, atol=1e-5)


def test_gat_trimmed_equals_untrimmed() -> None:
    hop, x = sampled_batch(seed=3)
    model = build_model(ModelSpec(arch=Arch.gat, hidden_channels=16, heads=2), 12, 5).eval()
    want = full_forward(list(model.convs), x, hop, torch.nn.functional.elu)  # type: ignore[arg-type]
    torch.testing.assert_close(model(x, hop), want, rtol=1e-5, atol=1e-5)


def test_mean_aggregate_matches_scatter_and_handles_empty_targets() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(10, 3, generator=g)
    dst = torch.tensor([0, 0, 2, 2, 2, 3])  # target 1 has no edges
    src = torch.tensor([4, 5, 6, 7, 8, 9])
    ptr = torch.tensor([0, 2, 2, 5, 6])
    got = mean_aggregate(x, src, ptr)
    torch.testing.assert_close(got, mean_aggregate_scatter(x, src, dst, 4))
    torch.testing.assert_close(got[0], (x[4] + x[5]) / 2)
    assert bool((got[1] == 0).all())


def test_hop_count_mismatch_is_a_clear_error() -> None:
    hop, x = sampled_batch()
    model = build_model(ModelSpec(arch=Arch.sage, num_layers=2, fanout=[5, 4]), 12, 5)
    with pytest.raises(ValueError, match="3 hops but the model has 2 layers"):
        model(x, hop)


def test_sage_bf16_autocast_cpu() -> None:
    hop, x = sampled_batch(seed=5)
    model = build_model(ModelSpec(arch=Arch.sage, hidden_channels=16), 12, 5).eval()
    want = model(x, hop)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(x, hop)
    assert got.dtype == torch.bfloat16
    err = (got.float() - want).norm() / want.norm()
    assert float(err) < 3e-2


@pytest.mark.gpu
def test_sage_gpu_bf16_matches_cpu() -> None:
    hop, x = sampled_batch(seed=6)
    model = build_model(ModelSpec(arch=Arch.sage, hidden_channels=16), 12, 5).eval()
    want = model(x, hop)
    cuda_model = model.to("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = cuda_model(x.cuda(), hop.to("cuda")).float().cpu()
    assert float((got - want).norm() / want.norm()) < 3e-2


def test_segment_backward_matches_autograd() -> None:
    """The transposed-CSR backward gives PyTorch's gradient, zero for unreferenced rows."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(12, 5, dtype=torch.float64, generator=g, requires_grad=True)
    dst = torch.tensor([0, 0, 0, 2, 2, 3, 4, 4])  # target 1 has no edges
    src = torch.tensor([5, 6, 5, 7, 0, 9, 9, 1])  # rows 2-4, 8, 10, 11 are never read
    ptr = torch.tensor([0, 3, 3, 5, 6, 8])
    weight = torch.randn(5, 5, dtype=torch.float64, generator=g)
    (grad_want,) = torch.autograd.grad((mean_aggregate(x, src, ptr) @ weight).sum(), x)
    out = mean_aggregate_segment(x, src, ptr, dst)
    torch.testing.assert_close(out, mean_aggregate(x, src, ptr))
    (grad_got,) = torch.autograd.grad((out @ weight).sum(), x)
    torch.testing.assert_close(grad_got, grad_want)
    assert bool((grad_got[[2, 3, 4, 8, 10, 11]] == 0).all())


def test_sage_segment_aggregation_same_loss_and_gradients() -> None:
    hop, x = sampled_batch(seed=8)
    grads = []
    for aggregation in ("embedding_bag", "segment"):
        torch.manual_seed(0)
        model = build_model(ModelSpec(arch=Arch.sage, hidden_channels=16), 12, 5).eval()
        model.aggregation = aggregation  # type: ignore[assignment]
        loss = model(x, hop).square().sum()
        grads.append(torch.autograd.grad(loss, list(model.parameters())))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("aggregation", ["segment", "embedding_bag", "scatter"])
def test_padded_gemm_rows_change_nothing(aggregation: str) -> None:
    """Targets padded to a coarse row multiple (repeating GEMM shapes): same logits, grads."""
    from distgnn_workload.models.sage import GraphSAGE, padded_rows

    hop, x = sampled_batch(seed=3)
    x.requires_grad_(True)
    results = []
    for pad in (False, True):
        torch.manual_seed(0)
        model = GraphSAGE(12, 16, 5, 3, dropout=0.0, aggregation=aggregation)  # type: ignore[arg-type]
        model.pad_rows = pad
        out = model(x, hop)
        loss = (out * torch.arange(out.numel()).reshape(out.shape)).sum()
        grads = torch.autograd.grad(loss, [x, *model.parameters()])
        results.append((out, grads))
    (out0, grads0), (out1, grads1) = results
    assert torch.allclose(out0, out1, atol=1e-5)
    for a, b in zip(grads0, grads1, strict=True):
        assert torch.allclose(a, b, atol=1e-4)
    # padding happened in some layer
    sizes = [hop.layer_sizes(layer)[1] for layer in range(3)]
    assert any(padded_rows(n, hop.num_nodes) > n for n in sizes), sizes
    assert padded_rows(138_001, 10**6) == 139_264  # a multiple of 4096
    assert padded_rows(138_001, 138_500) == 138_500
    assert padded_rows(1024, 10**6) == 1024
    assert padded_rows(14_700, 10**6) == 14_848  # a multiple of 256
