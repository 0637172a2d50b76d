"""The fixed-shape (CUDA-graph ready) GraphSAGE step equals the compact one, logits and grads."""

from __future__ import annotations

import pytest
import torch

from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.sampling import (
    HopBatch,
    NeighborSampler,
    StaticLayout,
    csc_from_edge_index,
    pad_hops,
)

FANOUTS = [4, 3, 2]


def _batch(num_seeds: int, seed: int = 0) -> tuple[torch.Tensor, HopBatch]:
    g = torch.Generator().manual_seed(seed)
    n = 500
    edge_index = torch.randint(0, n, (2, 4000), generator=g)
    indptr, indices = csc_from_edge_index(edge_index, n)
    sampler = NeighborSampler(indptr, indices, FANOUTS, device="cpu", seed=seed)
    hop = sampler.sample(torch.randperm(n, generator=g)[:num_seeds])
    return torch.randn(hop.num_nodes, 6, generator=g), hop


def test_padding_keeps_every_real_edge_and_sizes_are_fixed() -> None:
    layout = StaticLayout(20, tuple(FANOUTS))
    assert layout.hop_caps == [20, 80, 240, 480]
    for seeds in (20, 7):
        _, hop = _batch(seeds)
        static = pad_hops(hop, layout)
        for layer in range(3):
            _, targets, edges = hop.layer_sizes(layer)
            src, dst, ptr = static.src[layer], static.dst[layer], static.ptr[layer]
            assert src.numel() == dst.numel() == layout.edge_cap(layer)
            assert ptr.numel() == layout.target_cap(layer) + 2
            assert torch.equal(src[:edges], hop.edge_index[0, :edges])
            sources = hop.layer_sizes(layer)[0]
            rows = layout.input_rows(layer)
            assert bool((src[edges:] >= sources).all())
            assert bool((src[edges:] < rows).all())
            # no source row collects the padding (the backward's bags stay short)
            per_source = torch.bincount(src[edges:], minlength=rows)[sources:]
            assert int(per_source.max()) <= -(-(src.numel() - edges) // (rows - sources))
            assert bool((dst[edges:] >= targets).all())
            assert bool((dst <= layout.target_cap(layer)).all())
            # a valid CSR over every row, each edge in its target's bag
            assert int(ptr[0]) == 0
            assert int(ptr[-1]) == src.numel()
            assert bool((ptr[1:] >= ptr[:-1]).all())
            bag = torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr[1:] - ptr[:-1])
            assert torch.equal(bag, dst)
            assert int((ptr[1:] - ptr[:-1])[targets:].max()) <= 1 + (src.numel() - edges)


@pytest.mark.parametrize("aggregation", ["segment", "embedding_bag", "scatter"])
@pytest.mark.parametrize("seeds", [20, 7])
def test_static_forward_and_grads_equal_the_compact_ones(aggregation: str, seeds: int) -> None:
    layout = StaticLayout(20, tuple(FANOUTS))
    x, hop = _batch(seeds, seed=1)
    torch.manual_seed(0)
    model = GraphSAGE(6, 16, 5, 3, dropout=0.0, aggregation=aggregation)  # type: ignore[arg-type]
    weights = torch.randn(seeds, 5)

    x1 = x.clone().requires_grad_(True)
    out = model(x1, hop)
    grads = torch.autograd.grad((out * weights).sum(), [x1, *model.parameters()])

    static = pad_hops(hop, layout)
    x2 = torch.full((layout.node_cap + 1, 6), 7.0)  # stale rows: any finite values
    x2[-1] = 0.0
    x2[: x.size(0)] = x
    x2.requires_grad_(True)
    logits = model.forward_static(x2, static)
    assert logits.shape == (21, 5)
    mask = torch.zeros(21, 5)
    mask[:seeds] = weights
    static_grads = torch.autograd.grad((logits * mask).sum(), [x2, *model.parameters()])

    assert torch.allclose(logits[:seeds], out, atol=1e-5)
    assert torch.allclose(static_grads[0][: x.size(0)], grads[0], atol=1e-5)
    assert float(static_grads[0][x.size(0) :].abs().max()) == 0.0
    for a, b in zip(static_grads[1:], grads[1:], strict=True):
        assert torch.allclose(a, b, atol=1e-4)


def test_a_batch_larger_than_the_layout_is_refused() -> None:
    _, hop = _batch(20)
    with pytest.raises(ValueError, match="exceed the layout's batch size"):
        pad_hops(hop, StaticLayout(10, tuple(FANOUTS)))
    with pytest.raises(ValueError, match="capacity"):
        pad_hops(hop, StaticLayout(20, (4, 3, 1)))
