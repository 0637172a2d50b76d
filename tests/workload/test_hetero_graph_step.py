"""The typed fixed-shape step (what a CUDA graph replays) computes what the eager step does.

On CPU the fixed-shape computation runs eagerly (``capture=False``), over the bounds of the
typed sampler, with real rows followed by stale ones from an earlier, larger batch; on a GPU
(``gpu`` tier) it is captured and replayed. Either way the loss, every dense gradient and
the rows the sparse optimizer updates must equal the eager step's on the same batch.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.models import build_hetero_model
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.static_sample import StaticCaps
from distgnn_workload.trainer.graph_step import HeteroGraphStep

FANOUTS = (4, 3)
BATCH = 64
DIM = 8


def _graph() -> HeteroGraphData:
    return generate_mag(SyntheticHeteroConfig(scale=0.002, seed=1, num_classes=5, num_features=12))


def _setup(arch: Arch, device: torch.device):  # type: ignore[no-untyped-def]
    graph = _graph()
    target = graph.target_node_type
    features = {t: torch.from_numpy(x).to(device) for t, x in graph.x.items()}
    widths = {t: x.size(1) for t, x in features.items()}
    widths |= dict.fromkeys(graph.featureless_types, DIM)
    spec = ModelSpec(
        arch=arch,
        hidden_channels=16,
        num_layers=2,
        fanout=list(FANOUTS),
        dropout=0.0,
        embedding_dim=DIM,
    )
    torch.manual_seed(0)
    model = build_hetero_model(
        spec, graph.node_types, graph.edge_types, widths, graph.num_classes, target
    ).to(device)
    sampler = HeteroNeighborSampler(
        graph.in_csr,
        graph.node_counts,
        list(FANOUTS),
        seed_type=target,
        seed=3,
        device=device,
        static_shapes=False,
    )
    labels = torch.from_numpy(graph.y).to(device)
    return graph, features, model, sampler, labels


def _tables(graph, device: torch.device) -> list[ShardedEmbedding]:  # type: ignore[no-untyped-def]
    exchange = RowExchange.local(device)
    return [
        ShardedEmbedding(RowOwnership.single(t, graph.node_counts[t]), DIM, exchange, seed=5)
        for t in graph.featureless_types
    ]


def _batch(sampler, features, labels, seeds: Tensor) -> HeteroMiniBatch:  # type: ignore[no-untyped-def]
    hop = sampler.sample(seeds)
    x = {t: f[hop.node_ids[t]] for t, f in features.items()}
    return HeteroMiniBatch(hop=hop, x=x, y=labels[hop.seed_ids])


def _eager_step(
    model: RelationalGNN, tables: list[ShardedEmbedding], batch: HeteroMiniBatch
) -> tuple[float, dict[str, Tensor], dict[str, Tensor]]:
    x = dict(batch.x)
    for table in tables:
        x[table.node_type] = table.lookup(batch.hop.node_ids[table.node_type])
    loss = F.cross_entropy(model(x, batch.hop).float(), batch.y)
    model.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    loss = loss.detach()
    rows: dict[str, Tensor] = {}
    for table in tables:
        reduced = table.reduce_grads()
        assert reduced is not None
        touched, grad = reduced
        rows[table.node_type] = torch.zeros(table.num_rows, DIM, device=grad.device).index_add_(
            0, touched, grad
        )
    return float(loss), grads, rows


def _captured_grads(
    step: HeteroGraphStep, batch: HeteroMiniBatch, tables: list[ShardedEmbedding]
) -> tuple[float, dict[str, Tensor], dict[str, Tensor]]:
    # no zero_grad here: a replayed graph writes the gradients it captured, in place
    loss = step.step(batch)
    grads = {n: p.grad.clone() for n, p in step.model.named_parameters() if p.grad is not None}
    rows: dict[str, Tensor] = {}
    for table in tables:
        reduced = table.reduce_grads()
        assert reduced is not None
        touched, grad = reduced
        rows[table.node_type] = torch.zeros(table.num_rows, DIM, device=grad.device).index_add_(
            0, touched, grad
        )
    return float(loss), grads, rows


class _NoStep(torch.optim.Optimizer):
    """Keeps the parameters (and the gradients) as they are: the test reads the gradients."""

    def __init__(self, params) -> None:  # type: ignore[no-untyped-def]
        super().__init__(params, {})

    def step(self, closure=None):  # type: ignore[no-untyped-def]
        return None


class _KeepRows(RowSparseAdam):
    @torch.no_grad()
    def step(self) -> None:  # the test reduces the row gradients itself
        return None


def _check(arch: Arch, device: torch.device, capture: bool) -> None:
    graph, features, model, sampler, labels = _setup(arch, device)
    assert isinstance(model, RelationalGNN)
    twin = copy.deepcopy(model)
    target = graph.target_node_type
    caps = StaticCaps.bounds(
        graph.node_counts,
        graph.edge_types,
        {et: list(FANOUTS) for et in graph.edge_types},
        target,
        BATCH,
    )
    tables, twin_tables = _tables(graph, device), _tables(graph, device)
    step = HeteroGraphStep(
        model,
        _NoStep(model.parameters()),
        caps,
        graph.edge_types,
        features={t: (f.size(1), f.dtype) for t, f in features.items()},
        tables=tables,
        sparse=_KeepRows(tables),
        device=device,
        bf16=False,
        world_size=1,
        capture=capture,
    )
    train = torch.from_numpy(graph.train_mask).nonzero().flatten().to(device)
    # a full batch first (its rows stay in the buffers), then shorter ones over stale rows
    for size in (BATCH, BATCH, BATCH // 2, 5, BATCH // 3, BATCH):
        seeds = train[torch.randperm(train.numel(), device=device)[:size]]
        batch = _batch(sampler, features, labels, seeds)
        loss, grads, rows = _eager_step(twin, twin_tables, batch)
        got_loss, got_grads, got_rows = _captured_grads(step, batch, tables)
        assert got_loss == pytest.approx(loss, rel=1e-4, abs=1e-5)
        assert got_grads.keys() == grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)
        for t, row_grads in rows.items():
            torch.testing.assert_close(got_rows[t], row_grads, rtol=1e-4, atol=1e-5, msg=t)
            # only the batch's rows are touched, as in the eager step
            assert torch.equal(got_rows[t].abs().sum(1) > 0, row_grads.abs().sum(1) > 0)
    if capture:
        assert step.graph is not None, "the step was not captured"


@pytest.mark.slow
@pytest.mark.parametrize("arch", [Arch.rsage, Arch.rgcn])
def test_fixed_shape_step_equals_eager_step_cpu(arch: Arch) -> None:
    _check(arch, torch.device("cpu"), capture=False)


@pytest.mark.gpu
@pytest.mark.parametrize("arch", [Arch.rsage, Arch.rgcn])
def test_captured_step_equals_eager_step_gpu(arch: Arch) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    _check(arch, torch.device("cuda"), capture=True)
