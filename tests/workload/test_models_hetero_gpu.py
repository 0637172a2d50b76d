"""R-SAGE and R-GCN on a GPU: the same logits and gradients as on the CPU for one batch of the
GPU sampler (static shapes, CUDA graph), and a bf16 autocast step that trains every weight."""

from __future__ import annotations

import pytest
import torch

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.models import build_hetero_model
from distgnn_workload.sampling import HeteroNeighborSampler
from tests.workload.hetero_graphs import MAG_LIKE, NUM_NODES, typed_graph

pytestmark = pytest.mark.gpu

WIDTHS = {"paper": 16, "author": 8, "field": 8, "institution": 12}


@pytest.mark.parametrize("arch", [Arch.rsage, Arch.rgcn])
def test_gpu_model_equals_cpu_and_trains_in_bf16(arch: Arch) -> None:
    cuda = torch.device("cuda")
    _, csr = typed_graph(0)
    sampler = HeteroNeighborSampler(csr, NUM_NODES, [8, 4], seed_type="paper", device=cuda)
    batch = sampler.sample(torch.arange(64, device=cuda))
    g = torch.Generator().manual_seed(1)
    table = {t: torch.randn(n, WIDTHS[t], generator=g) for t, n in NUM_NODES.items()}
    x = {t: table[t][batch.node_ids[t].cpu()] for t in NUM_NODES}
    spec = ModelSpec(arch=arch, hidden_channels=32, num_layers=2, fanout=[8, 4], dropout=0.0)
    torch.manual_seed(0)
    model = build_hetero_model(spec, list(NUM_NODES), list(MAG_LIKE), WIDTHS, 7, "paper")
    cpu_out = model(x, batch.to("cpu"))
    cpu_out.square().sum().backward()
    cpu_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.to(cuda)
    gpu_out = model({t: v.to(cuda) for t, v in x.items()}, batch)
    gpu_out.square().sum().backward()
    torch.testing.assert_close(gpu_out.cpu(), cpu_out, rtol=1e-3, atol=1e-3)
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad.cpu(), cpu_grads[name], rtol=1e-3, atol=1e-3)
    model.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        half = model({t: v.to(cuda) for t, v in x.items()}, batch)
    assert half.dtype == torch.bfloat16
    half.float().square().sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    torch.testing.assert_close(half.float().cpu(), cpu_out, rtol=0.05, atol=0.05)
