"""The typed fixed-shape step (what a CUDA graph replays) computes what the eager step does.

On CPU the fixed-shape computation runs eagerly (``capture=False``), over the bounds of the
typed sampler or caps fitted below some batches (those run the step's eager path), with real
rows followed by stale ones from an earlier, larger batch; on a GPU (``gpu`` tier) it is
captured and replayed. Either way the loss, every dense gradient and
the rows the sparse optimizer updates must equal the eager step's on the same batch.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from distgnn_api.spec import Arch
from distgnn_workload.embeddings import RowSparseAdam, ShardedEmbedding
from distgnn_workload.embeddings.optim import TableState
from distgnn_workload.embeddings.routes import Touched
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.trainer.graph_step import HeteroGraphStep
from tests.support.hetero_step import BATCH, DIM, HeteroParts


def _row_grads(tables: list[ShardedEmbedding]) -> dict[str, Tensor]:
    """Each table's summed row gradients of the step, over all its rows."""
    rows: dict[str, Tensor] = {}
    for table in tables:
        reduced = table.reduce_grads()
        assert reduced is not None
        touched, grad = reduced
        rows[table.node_type] = torch.zeros(table.num_rows, DIM, device=grad.device).index_add_(
            0, touched, grad
        )
    return rows


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
    return float(loss), grads, _row_grads(tables)


def _captured_grads(
    step: HeteroGraphStep, batch: HeteroMiniBatch, sparse: _KeepRows
) -> tuple[float, dict[str, Tensor], dict[str, Tensor]]:
    # no zero_grad here: a replayed graph writes the gradients it captured, in place
    loss = step.step(batch)
    grads = {n: p.grad.clone() for n, p in step.model.named_parameters() if p.grad is not None}
    return float(loss), grads, sparse.row_grads()


class _NoStep(torch.optim.Optimizer):
    """Keeps the parameters (and the gradients) as they are: the test reads the gradients."""

    def __init__(self, params) -> None:  # type: ignore[no-untyped-def]
        super().__init__(params, {})

    def step(self, closure=None):  # type: ignore[no-untyped-def]
        return None


class _KeepRows(RowSparseAdam):
    """Keeps each table's touched rows and their summed gradients instead of updating them.

    The step calls it inside the captured graph (one rank) and eagerly for a batch over the
    caps: either way it writes them, at fixed shapes, into tensors of its own."""

    def __init__(self, tables: list[ShardedEmbedding]) -> None:
        super().__init__(tables)
        self.grads = {t.node_type: t.weight.new_zeros(t.num_rows, DIM) for t in tables}
        self.hits = {
            t.node_type: torch.zeros(t.num_rows, dtype=torch.int64, device=t.device) for t in tables
        }

    def _update(self, table: ShardedEmbedding, touched: Touched, st: TableState) -> None:
        real = torch.arange(touched.rows.numel(), device=table.device) < touched.count
        grads, hits = self.grads[table.node_type], self.hits[table.node_type]
        grads.zero_().index_put_((touched.rows,), touched.grad * real.unsqueeze(1), accumulate=True)
        hits.zero_().index_put_((touched.rows,), real.long(), accumulate=True)

    def row_grads(self) -> dict[str, Tensor]:
        """Each table's summed row gradients of the last step, over all its rows."""
        return {t: g.clone() for t, g in self.grads.items()}


def _check(arch: Arch, device: torch.device, capture: bool, fitted: bool = False) -> None:
    parts = HeteroParts(arch, device, static_shapes=False)
    graph, model = parts.graph, parts.model
    twin = copy.deepcopy(model)
    tables, twin_tables = parts.new_tables(), parts.new_tables()
    sparse = _KeepRows(tables)
    train = torch.from_numpy(graph.train_mask).nonzero().flatten().to(device)
    step = HeteroGraphStep(
        model,
        _NoStep(model.parameters()),
        # caps fitted to batches of half the capacity: full batches go over them, a third fits
        parts.fitted_caps(BATCH // 2, headroom=1.3) if fitted else parts.caps,
        graph.edge_types,
        tables=tables,
        sparse=sparse,
        features={t: (f.size(1), f.dtype) for t, f in parts.features.items()},
        device=device,
        bf16=False,
        world_size=1,
        capture=capture,
    )
    # a full batch first (its rows stay in the buffers), then shorter ones over stale rows;
    # with fitted caps the full batches go over them (the eager path of the same step)
    sizes: tuple[int, ...] = (BATCH, BATCH, BATCH // 2, 5, BATCH // 3, BATCH)
    if fitted:
        sizes = (BATCH // 3, 5, BATCH // 4, BATCH // 3, BATCH, 7, BATCH, BATCH // 3)
    for size in sizes:
        seeds = train[torch.randperm(train.numel(), device=device)[:size]]
        batch = parts.batch(seeds)
        loss, grads, rows = _eager_step(twin, twin_tables, batch)
        got_loss, got_grads, got_rows = _captured_grads(step, batch, sparse)
        assert got_loss == pytest.approx(loss, rel=1e-4, abs=1e-5)
        assert got_grads.keys() == grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)
        for t, row_grads in rows.items():
            torch.testing.assert_close(got_rows[t], row_grads, rtol=1e-4, atol=1e-5, msg=t)
            # only the batch's rows are touched, as in the eager step
            assert torch.equal(got_rows[t].abs().sum(1) > 0, row_grads.abs().sum(1) > 0)
            # and the optimizer is handed exactly those, once each (a row with a zero
            # gradient would still move under Adam's moments)
            hits = sparse.hits[t]
            assert int(hits.max()) == 1, t
            handed = hits.nonzero().flatten()
            assert torch.equal(handed, torch.unique(batch.hop.node_ids[t])), t
    if capture:
        assert step.graph is not None, "the step was not captured"
    if fitted:
        assert 0 < step.oversize < len(sizes), f"{step.oversize} of {len(sizes)} steps eager"


@pytest.mark.slow
@pytest.mark.parametrize("fitted", [False, True])
@pytest.mark.parametrize("arch", [Arch.rsage, Arch.rgcn])
def test_fixed_shape_step_equals_eager_step_cpu(arch: Arch, fitted: bool) -> None:
    _check(arch, torch.device("cpu"), capture=False, fitted=fitted)


@pytest.mark.gpu
@pytest.mark.parametrize("fitted", [False, True])
@pytest.mark.parametrize("arch", [Arch.rsage, Arch.rgcn])
def test_captured_step_equals_eager_step_gpu(arch: Arch, fitted: bool) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    _check(arch, torch.device("cuda"), capture=True, fitted=fitted)
