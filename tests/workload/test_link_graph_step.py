"""The fixed-shape link step (what a CUDA graph replays) trains exactly like the eager one.

On CPU the fixed-shape computation runs eagerly (``capture=False``); on a GPU (``gpu``
tier) it is captured and replayed. Over full batches, short ones (fewer positives than the
layout holds) and padded ones (a short batch after a full one leaves stale rows past its
real ones), the loss and every gradient must equal the eager step's on the same batch.
"""

from __future__ import annotations

import copy

import pytest
import torch

from distgnn_workload.loader import MiniBatch
from distgnn_workload.models.link import LinkModel, build_decoder, link_loss
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.sampling import NeighborSampler, StaticLayout, csc_from_edge_index, pad_hops
from distgnn_workload.sampling.link_sampler import LinkNeighborSampler
from distgnn_workload.sampling.seed_edges import LinkLayout, pack_pairs
from distgnn_workload.trainer.link_graph_step import LinkGraphStep

FANOUTS = (4, 3)
POSITIVES = 8
SIZES = (8, 5, 8, 3, 1, 8)
"""Positives per batch: full, short, full again, short (stale rows behind), one, full."""
N, F_IN, HIDDEN = 300, 8, 16


def _batches(device: str, negatives: int, kind: str) -> list[MiniBatch]:
    g = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, N, (2, 2400), generator=g)
    indptr, indices = csc_from_edge_index(edge_index, N)
    nodes = NeighborSampler(indptr, indices, list(FANOUTS), device=device, seed=0)
    sampler = LinkNeighborSampler(nodes, negatives=negatives, kind=kind)
    features = torch.randn(N, F_IN, generator=g).to(device)
    out = []
    for size in SIZES:
        pick = torch.randint(0, edge_index.size(1), (size,), generator=g)
        pairs = pack_pairs(edge_index[0, pick], edge_index[1, pick], N)
        hop = sampler.sample(pairs).to(device)
        y = torch.zeros(hop.num_seeds, dtype=torch.int64, device=device)
        out.append(MiniBatch(hop=hop, x=features[hop.node_ids], y=y))
    return out


def _train_both(
    device: str, *, negatives: int, kind: str, decoder: str, capture: bool
) -> tuple[list[float], list[float], list[list[torch.Tensor]], list[list[torch.Tensor]]]:
    torch.manual_seed(0)
    encoder = GraphSAGE(F_IN, 32, HIDDEN, len(FANOUTS), dropout=0.0)
    eager = LinkModel(encoder, build_decoder(decoder, HIDDEN), negatives, kind).to(device)
    static = copy.deepcopy(eager)
    eager_opt = torch.optim.Adam(eager.parameters(), lr=0.01)
    static_opt = torch.optim.Adam(static.parameters(), lr=0.01)
    rows = POSITIVES * LinkLayout.seeds_per_positive(negatives, kind)
    layout = StaticLayout(rows, FANOUTS)
    step = LinkGraphStep(
        static,
        static_opt,
        layout,
        num_features=F_IN,
        input_dtype=torch.float32,
        device=torch.device(device),
        bf16=False,
        world_size=1,
        capture=capture,
    )
    eager_losses, static_losses = [], []
    eager_grads, static_grads = [], []
    for batch in _batches(device, negatives, kind):
        pos, neg = eager(batch.x, batch.hop)
        loss = link_loss(pos, neg)
        eager_opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        eager_grads.append([p.grad.clone() for p in eager.parameters() if p.grad is not None])
        eager_opt.step()
        eager_losses.append(float(loss.detach()))
        batch.static = pad_hops(batch.hop, layout)
        static_losses.append(float(step.step(batch)))
        static_grads.append([p.grad.clone() for p in static.parameters() if p.grad is not None])
    return eager_losses, static_losses, eager_grads, static_grads


CASES = [(1, "uniform", "dot"), (2, "corruptDestination", "dot"), (1, "uniform", "mlp")]


@pytest.mark.parametrize(("negatives", "kind", "decoder"), CASES)
def test_static_link_steps_follow_the_eager_steps(negatives: int, kind: str, decoder: str) -> None:
    eager_losses, static_losses, eager_grads, static_grads = _train_both(
        "cpu", negatives=negatives, kind=kind, decoder=decoder, capture=False
    )
    assert static_losses == pytest.approx(eager_losses, rel=1e-5, abs=1e-6)
    for step, (a, b) in enumerate(zip(eager_grads, static_grads, strict=True)):
        assert len(a) == len(b) > 0, step
        for ga, gb in zip(a, b, strict=True):
            assert torch.allclose(ga, gb, rtol=1e-4, atol=1e-6), step


def test_the_pair_rows_of_a_short_batch_are_its_layouts_rows() -> None:
    torch.manual_seed(0)
    for negatives, kind in ((1, "uniform"), (3, "corruptDestination")):
        encoder = GraphSAGE(F_IN, 32, HIDDEN, len(FANOUTS))
        model = LinkModel(encoder, build_decoder("dot", HIDDEN), negatives, kind)
        rows = POSITIVES * LinkLayout.seeds_per_positive(negatives, kind)
        step = LinkGraphStep(
            model,
            torch.optim.Adam(model.parameters()),
            StaticLayout(rows, FANOUTS),
            num_features=F_IN,
            input_dtype=torch.float32,
            device=torch.device("cpu"),
            bf16=False,
            world_size=1,
        )
        step.positives.fill_(5)
        got = step.pair_rows()
        want = LinkLayout(5, negatives, kind).rows()
        assert torch.equal(got[0][:5], want[0])
        assert torch.equal(got[1][:5], want[1])
        assert torch.equal(got[2][: 5 * negatives], want[2])
        assert torch.equal(got[3][: 5 * negatives], want[3])
        assert all(int(r.max()) < rows for r in got)  # padding pairs stay within the seeds


def test_a_layout_that_is_no_whole_link_batch_is_refused() -> None:
    encoder = GraphSAGE(F_IN, 32, HIDDEN, len(FANOUTS))
    model = LinkModel(encoder, build_decoder("dot", HIDDEN), 1, "uniform")
    with pytest.raises(ValueError, match="4 rows per positive"):
        LinkGraphStep(
            model,
            torch.optim.Adam(model.parameters()),
            StaticLayout(30, FANOUTS),
            num_features=F_IN,
            input_dtype=torch.float32,
            device=torch.device("cpu"),
            bf16=False,
            world_size=1,
        )


@pytest.mark.gpu
@pytest.mark.parametrize(("negatives", "kind", "decoder"), CASES)
def test_the_captured_link_step_follows_the_eager_steps_on_gpu(
    negatives: int, kind: str, decoder: str
) -> None:
    eager_losses, static_losses, eager_grads, static_grads = _train_both(
        "cuda", negatives=negatives, kind=kind, decoder=decoder, capture=True
    )
    assert static_losses == pytest.approx(eager_losses, rel=1e-3, abs=1e-4)
    for a, b in zip(eager_grads, static_grads, strict=True):
        for ga, gb in zip(a, b, strict=True):
            assert torch.allclose(ga, gb, rtol=1e-2, atol=1e-4)
