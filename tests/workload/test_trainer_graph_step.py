"""The fixed-shape training step (what the CUDA graph replays) trains exactly like the eager one."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from distgnn_workload.loader import MiniBatch
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.sampling import NeighborSampler, StaticLayout, csc_from_edge_index, pad_hops
from distgnn_workload.trainer.graph_step import GraphStep

FANOUTS = [4, 3]


def _batches(device: str, count: int = 6) -> list[MiniBatch]:
    g = torch.Generator().manual_seed(0)
    n = 400
    edge_index = torch.randint(0, n, (2, 3000), generator=g)
    indptr, indices = csc_from_edge_index(edge_index, n)
    sampler = NeighborSampler(indptr, indices, FANOUTS, device=device, seed=0)
    features = torch.randn(n, 8, generator=g).to(device)
    labels = torch.randint(0, 3, (n,), generator=g).to(device)
    out = []
    for i in range(count):
        seeds = torch.randperm(n, generator=g)[: 16 if i % 3 else 11]  # some short batches
        hop = sampler.sample(seeds).to(device)
        out.append(MiniBatch(hop=hop, x=features[hop.node_ids], y=labels[hop.seed_ids]))
    return out


def _train_both(
    device: str, capture: bool
) -> tuple[list[float], list[float], GraphSAGE, GraphSAGE]:
    torch.manual_seed(0)
    eager_model = GraphSAGE(8, 16, 3, 2, dropout=0.0).to(device)
    graph_model = copy.deepcopy(eager_model)
    eager_opt = torch.optim.Adam(eager_model.parameters(), lr=0.01)
    graph_opt = torch.optim.Adam(graph_model.parameters(), lr=0.01)
    layout = StaticLayout(16, tuple(FANOUTS))
    step = GraphStep(
        graph_model,
        graph_opt,
        layout,
        num_features=8,
        input_dtype=torch.float32,
        device=torch.device(device),
        bf16=False,
        world_size=1,
        capture=capture,
    )
    eager_losses, graph_losses = [], []
    for batch in _batches(device):
        loss = F.cross_entropy(eager_model(batch.x, batch.hop), batch.y)
        eager_opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        eager_opt.step()
        eager_losses.append(float(loss))
        batch.static = pad_hops(batch.hop, layout)
        graph_losses.append(float(step.step(batch)))
    return eager_losses, graph_losses, eager_model, graph_model


def test_static_steps_follow_the_eager_steps_exactly() -> None:
    eager_losses, graph_losses, eager_model, graph_model = _train_both("cpu", capture=False)
    assert graph_losses == pytest.approx(eager_losses, rel=1e-5, abs=1e-6)
    for a, b in zip(eager_model.parameters(), graph_model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_a_batch_without_its_padded_form_is_refused() -> None:
    model = GraphSAGE(8, 16, 3, 2)
    step = GraphStep(
        model,
        torch.optim.Adam(model.parameters()),
        StaticLayout(16, tuple(FANOUTS)),
        num_features=8,
        input_dtype=torch.float32,
        device=torch.device("cpu"),
        bf16=False,
        world_size=1,
    )
    with pytest.raises(ValueError, match="padded"):
        step.step(_batches("cpu", 1)[0])


@pytest.mark.gpu
def test_the_captured_step_follows_the_eager_steps_on_gpu() -> None:
    eager_losses, graph_losses, eager_model, graph_model = _train_both("cuda", capture=True)
    assert graph_losses == pytest.approx(eager_losses, rel=1e-3, abs=1e-4)
    for a, b in zip(eager_model.parameters(), graph_model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-3)


@pytest.mark.parametrize(
    ("raw", "mode"), [("", "hooks"), ("1", "hooks"), ("graph", "graph"), ("0", "off")]
)
def test_overlap_mode_is_read_from_the_env(
    monkeypatch: pytest.MonkeyPatch, raw: str, mode: str
) -> None:
    from distgnn_workload.trainer.captured_step import ENV_OVERLAP, overlap_mode

    if raw:
        monkeypatch.setenv(ENV_OVERLAP, raw)
    else:
        monkeypatch.delenv(ENV_OVERLAP, raising=False)
    assert overlap_mode() == mode


def test_an_unknown_overlap_mode_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from distgnn_workload.trainer.captured_step import ENV_OVERLAP, overlap_mode

    monkeypatch.setenv(ENV_OVERLAP, "sometimes")
    with pytest.raises(ValueError, match=ENV_OVERLAP):
        overlap_mode()
