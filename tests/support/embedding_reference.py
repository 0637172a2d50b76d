"""The compact embedding path (``torch.unique`` sizes, rows cut to the distinct ids), as the
sharded embeddings computed it before their fixed-capacity form: the reference that the
fixed-capacity lookups and row-sparse updates must equal bit for bit.

:class:`CompactTable` wraps a :class:`ShardedEmbedding` of its own (rows, ownership and
exchange) but looks up, reduces and updates with the compact code; :class:`CompactAdam` and
:class:`CompactAdagrad` are the row-sparse optimizers over it, with the same state layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from distgnn_workload.embeddings import ShardedEmbedding
from distgnn_workload.embeddings.exchange import sum_rows
from distgnn_workload.embeddings.routes import LookupRows, Route


@dataclass
class CompactTable:
    """The compact lookup and gradient reduction over ``table``'s rows and exchange."""

    table: ShardedEmbedding
    routes: list[Route] = field(default_factory=list)
    anchor: Tensor = field(default_factory=lambda: torch.empty(0, requires_grad=True))

    def lookup(self, ids: Tensor) -> Tensor:
        t = self.table
        flat = ids.reshape(-1).to(t.device, torch.int64)
        n = t.num_rows
        distinct, inverse = torch.unique(flat.clamp(0, max(n - 1, 0)), return_inverse=True)
        owner = t._owner[distinct]
        perm = torch.argsort(owner, stable=True)
        send_counts = torch.bincount(owner, minlength=t.exchange.world_size)
        counts = t.exchange.counts(send_counts, ((flat < 0) | (flat >= n)).sum())
        assert not counts.bad_ranks
        ex = t.exchange
        served = ex.rows(t._local[distinct[perm]], counts.send, counts.recv)
        block = t.weight[served].to(t.out_dtype)
        got = ex.rows(block, counts.recv, counts.send)
        rows = torch.empty_like(got)
        rows[perm] = got
        if not torch.is_grad_enabled():
            return rows[inverse].reshape(*ids.shape, t.dim)
        route = Route(inverse, perm, counts.send, counts.recv, served)
        self.routes.append(route)
        out: Tensor = LookupRows.apply(self.anchor, rows, route)
        return out.reshape(*ids.shape, t.dim)

    def reduce_grads(self) -> tuple[Tensor, Tensor] | None:
        routes, self.routes = self.routes, []
        if not routes:
            return None
        t = self.table
        touched, inverse = torch.unique(torch.cat([r.served for r in routes]), return_inverse=True)
        grads: list[Tensor] = []
        for route in routes:
            perm = route.perm
            assert perm is not None  # the compact path sends every lookup
            grad = route.grad
            if grad is None:
                grad = torch.zeros((perm.numel(), t.dim), device=t.device)
            block = grad[perm].to(t.out_dtype)
            grads.append(t.exchange.rows(block, route.send, route.recv).float())
        return touched, sum_rows(torch.cat(grads), inverse, touched.numel())


class _CompactOptimizer:
    def __init__(self, tables: list[CompactTable], lr: float) -> None:
        self.tables = tables
        self.lr = lr
        self.steps = {c.table.node_type: 0 for c in tables}
        self.rows: dict[str, dict[str, Tensor]] = {}

    @torch.no_grad()
    def step(self) -> None:
        for c in self.tables:
            reduced = c.reduce_grads()
            if reduced is None:
                continue
            rows, grad = reduced
            name = c.table.node_type
            self.steps[name] += 1
            if rows.numel():
                self._update(c.table, rows, grad, self.rows[name], self.steps[name])

    def _update(
        self, table: ShardedEmbedding, rows: Tensor, grad: Tensor, st: dict[str, Tensor], step: int
    ) -> None:
        raise NotImplementedError


class CompactAdam(_CompactOptimizer):
    def __init__(self, tables: list[CompactTable], lr: float) -> None:
        super().__init__(tables, lr)
        self.betas, self.eps = (0.9, 0.999), 1e-8
        for c in tables:
            zeros = torch.zeros_like(c.table.weight)
            self.rows[c.table.node_type] = {"exp_avg": zeros, "exp_avg_sq": zeros.clone()}

    def _update(
        self, table: ShardedEmbedding, rows: Tensor, grad: Tensor, st: dict[str, Tensor], step: int
    ) -> None:
        beta1, beta2 = self.betas
        exp_avg, exp_avg_sq = st["exp_avg"], st["exp_avg_sq"]
        old_avg = exp_avg[rows]
        avg_update = grad.sub(old_avg).mul_(1 - beta1)
        exp_avg[rows] = old_avg + avg_update
        old_sq = exp_avg_sq[rows]
        sq_update = grad.pow(2).sub_(old_sq).mul_(1 - beta2)
        exp_avg_sq[rows] = old_sq + sq_update
        numer = avg_update.add_(old_avg)
        denom = sq_update.add_(old_sq).sqrt_().add_(self.eps)
        step_size = self.lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
        w = table.weight
        w[rows] = w[rows] + (-step_size * numer.div_(denom))


class CompactAdagrad(_CompactOptimizer):
    def __init__(self, tables: list[CompactTable], lr: float, lr_decay: float) -> None:
        super().__init__(tables, lr)
        self.lr_decay, self.eps = lr_decay, 1e-10
        for c in tables:
            self.rows[c.table.node_type] = {"sum": torch.zeros_like(c.table.weight)}

    def _update(
        self, table: ShardedEmbedding, rows: Tensor, grad: Tensor, st: dict[str, Tensor], step: int
    ) -> None:
        clr = self.lr / (1 + (step - 1) * self.lr_decay)
        acc = st["sum"]
        total = acc[rows] + grad.pow(2)
        acc[rows] = total
        std = total.sqrt().add_(self.eps)
        w = table.weight
        w[rows] = torch.add(w[rows], grad / std, alpha=-clr)
