"""Row-sparse optimizers for :class:`~.table.ShardedEmbedding`: lazy Adam and Adagrad.

Each owner updates only the rows of its shard that the step touched, after the backward:
``step()`` collects the row gradients of every table (collective, tables in the order
given, the same on every rank) and applies the update to those rows. The formulas are
those of ``torch.optim.SparseAdam`` and of ``torch.optim.Adagrad`` on sparse gradients, so
a sharded table trains as one ``nn.Embedding(sparse=True)`` does: moments and sums of rows
that a step does not touch stay as they are. A table's step count advances on every step in
which it was looked up (on any rank), as torch's counts advance for a table that has a
gradient. Every operation is elementwise on distinct rows, in a fixed order: a step is
deterministic.

The touched rows come at a fixed capacity, their number on the device
(:class:`~.table.Touched`): the update runs over every slot. Adam adds its updates
(``index_add_``: each touched row gets one add, the slots past the count add zero to rows
spread over the shard, so the order of the adds does not change a bit); Adagrad, and Adam
over rows in pinned host memory, write every slot, the slots past the count repeating the
last row with its values, so each row is written with one value. A step that touched no row
changes none. Nothing is read back to the host; Adam's step count is a device counter, so
that a step captured in a CUDA graph computes each replay's bias correction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.embeddings.exchange import host_copy, put_rows
from distgnn_workload.embeddings.fused_adam import fused_adam_available, fused_adam_rows
from distgnn_workload.embeddings.routes import Touched
from distgnn_workload.embeddings.table import ShardedEmbedding

FUSED_ADAM = True
"""Whether :class:`RowSparseAdam` updates rows in a GPU's memory with the fused kernel by
default (:mod:`.fused_adam`): on, as it measured faster than the tensor operations (the
typed benchmark, ``benchmarks/gpu_hetero/README.md``). Rows on the host, and GPUs without
Triton, take the tensor operations."""


@dataclass
class TableState:
    """A table's optimizer state on this rank: the step count and per-row tensors.

    ``counter`` holds the step count where the rows live (float64, 0-d), advanced in place
    by each step, so that a step captured in a CUDA graph reads the count of its replay;
    ``step`` is its host mirror (checkpoints, logs)."""

    counter: Tensor
    step: int = 0
    rows: dict[str, Tensor] = field(default_factory=dict)


class RowSparseOptimizer(ABC):
    """Updates the touched rows of each table's shard."""

    kind: str = ""
    state_rows: int = 0
    """Per-row state tensors of a table's shape it keeps (for the shards' placement)."""

    def __init__(self, tables: Sequence[ShardedEmbedding], lr: float) -> None:
        if not lr > 0:
            raise ValueError(f"the embedding learning rate must be > 0, got {lr}")
        names = [t.node_type for t in tables]
        if len(set(names)) != len(names):
            raise ValueError(f"one table per node type, got {names}")
        self.tables = list(tables)
        self.lr = lr
        self.state = {t.node_type: self._new_state(t) for t in self.tables}

    @abstractmethod
    def _new_state(self, table: ShardedEmbedding) -> TableState: ...

    @abstractmethod
    def _update(self, table: ShardedEmbedding, touched: Touched, st: TableState) -> None:
        """Apply one step to the touched rows (see :func:`_put` for the padding slots)."""

    def hyper(self) -> dict[str, float]:
        return {"lr": self.lr}

    @torch.no_grad()
    def step(self) -> None:
        """Collect each table's row gradients and update the rows it owns. Collective."""
        for table in self.tables:
            touched = table.reduce_touched()
            if touched is None:
                continue
            st = self.state[table.node_type]
            st.step += 1
            st.counter.add_(1)
            if touched.rows.numel():
                self._update(table, touched, st)
                table.exchange.stats.add("rows_updated", touched.count)

    def replayed(self, node_types: Sequence[str]) -> None:
        """Count a step of ``node_types``' tables that a CUDA graph replayed (on the host:
        the device counters advance themselves)."""
        for name in node_types:
            self.state[name].step += 1

    def host_steps(self) -> dict[str, int]:
        return {name: st.step for name, st in self.state.items()}

    def set_host_steps(self, steps: dict[str, int]) -> None:
        """Put the host step counts back (a capture that failed ran no step)."""
        for name, step in steps.items():
            st = self.state[name]
            st.step = step
            st.counter.fill_(step)

    def zero_grad(self) -> None:
        """Drop the gradients of lookups not yet stepped (every rank must do the same)."""
        for table in self.tables:
            table.discard_grads()

    def state_dict(self) -> dict[str, Any]:
        """Step counts and per-row state of this rank's shards (host tensors)."""
        return {
            "kind": self.kind,
            "hyper": self.hyper(),
            "tables": {
                name: {
                    "step": st.step,
                    "rows": {
                        k: host_copy(v, f"the {self.kind} state of {name!r}")
                        for k, v in st.rows.items()
                    },
                }
                for name, st in self.state.items()
            },
        }

    def load_state_dict(self, state: dict[str, Any], *, source: str = "the checkpoint") -> None:
        if state.get("kind") != self.kind:
            raise ValueError(
                f"{source}: the embeddings were trained with {state.get('kind')!r}, "
                f"this job uses {self.kind!r}"
            )
        saved = state.get("tables", {})
        if set(saved) != set(self.state):
            raise ValueError(
                f"{source}: optimizer state for node types {sorted(saved)}, this job has "
                f"{sorted(self.state)}"
            )
        for table in self.tables:
            st = self.state[table.node_type]
            entry = saved[table.node_type]
            for key, value in st.rows.items():
                got = entry["rows"].get(key)
                if got is None or got.shape != value.shape:
                    raise ValueError(
                        f"{source}: {self.kind} state {key!r} of {table.node_type!r} has shape "
                        f"{None if got is None else tuple(got.shape)}, want {tuple(value.shape)}"
                    )
                value.copy_(got.to(value.dtype))  # in place: the rows stay where they live
            st.step = int(entry["step"])
            st.counter.fill_(st.step)


class RowSparseAdam(RowSparseOptimizer):
    """Lazy Adam (``torch.optim.SparseAdam``): moments move only for touched rows.

    ``fused``: update each table's touched rows in one Triton kernel where it can
    (:mod:`.fused_adam`: rows in a GPU's memory) rather than in tensor operations; None:
    :data:`FUSED_ADAM`."""

    kind = "adam"
    state_rows = 2

    def __init__(
        self,
        tables: Sequence[ShardedEmbedding],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        *,
        fused: bool | None = None,
    ) -> None:
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"embedding Adam betas must be in [0, 1), got {betas}")
        if not eps > 0:
            raise ValueError(f"embedding Adam eps must be > 0, got {eps}")
        self.betas = betas
        self.eps = eps
        self.fused = FUSED_ADAM if fused is None else fused
        super().__init__(tables, lr)

    def hyper(self) -> dict[str, float]:
        return {"lr": self.lr, "beta1": self.betas[0], "beta2": self.betas[1], "eps": self.eps}

    def _new_state(self, table: ShardedEmbedding) -> TableState:
        return TableState(
            _counter(table),
            rows={"exp_avg": table.rows_like(0.0), "exp_avg_sq": table.rows_like(0.0)},
        )

    def _update(self, table: ShardedEmbedding, touched: Touched, st: TableState) -> None:
        beta1, beta2 = self.betas
        exp_avg, exp_avg_sq = st.rows["exp_avg"], st.rows["exp_avg_sq"]
        if self.fused and not table.host_memory and fused_adam_available(table.weight):
            fused_adam_rows(
                table.weight,
                exp_avg,
                exp_avg_sq,
                touched.rows,
                touched.grad,
                touched.count,
                self._step_size(st),
                betas=self.betas,
                eps=self.eps,
            )
            return
        write = _Puts(touched) if table.host_memory else _Adds(table, touched)
        rows, grad = touched.rows, touched.grad
        # old <- b * old + (1 - b) * new, written old + (1 - b) * (new - old) as torch does
        old_avg = exp_avg[rows]
        avg_update = grad.sub(old_avg).mul_(1 - beta1)
        write.add(exp_avg, avg_update, old_avg)
        old_sq = exp_avg_sq[rows]
        sq_update = grad.pow(2).sub_(old_sq).mul_(1 - beta2)
        write.add(exp_avg_sq, sq_update, old_sq)
        numer = avg_update.add_(old_avg)
        denom = sq_update.add_(old_sq).sqrt_().add_(self.eps)
        write.add(table.weight, numer.div_(denom).mul_(-self._step_size(st)))

    def _step_size(self, st: TableState) -> Tensor:
        """``lr * sqrt(1 - beta2**t) / (1 - beta1**t)`` at the table's step count, a 0-d
        float64 tensor on the device (as torch computes it in Python floats)."""
        beta1, beta2 = self.betas
        bias1 = 1 - torch.pow(beta1, st.counter)
        bias2 = 1 - torch.pow(beta2, st.counter)
        return bias2.sqrt_().mul_(self.lr).div_(bias1)


class RowSparseAdagrad(RowSparseOptimizer):
    """Adagrad on row gradients (``torch.optim.Adagrad`` with sparse gradients)."""

    kind = "adagrad"
    state_rows = 1

    def __init__(
        self,
        tables: Sequence[ShardedEmbedding],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        eps: float = 1e-10,
        initial_accumulator_value: float = 0.0,
    ) -> None:
        if lr_decay < 0 or initial_accumulator_value < 0 or not eps > 0:
            raise ValueError(
                "embedding Adagrad needs lr_decay >= 0, initial_accumulator_value >= 0 and "
                f"eps > 0; got {lr_decay}, {initial_accumulator_value}, {eps}"
            )
        self.lr_decay = lr_decay
        self.eps = eps
        self.initial = initial_accumulator_value
        super().__init__(tables, lr)

    def hyper(self) -> dict[str, float]:
        return {"lr": self.lr, "lr_decay": self.lr_decay, "eps": self.eps, "initial": self.initial}

    def _new_state(self, table: ShardedEmbedding) -> TableState:
        return TableState(_counter(table), rows={"sum": table.rows_like(self.initial)})

    def _update(self, table: ShardedEmbedding, touched: Touched, st: TableState) -> None:
        rows, grad, any_rows = touched.rows, touched.grad, touched.count > 0
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            # torch's Adagrad scales by a host float (bit-equal here): not in a CUDA graph
            raise RuntimeError("the row-sparse Adagrad step cannot be captured in a CUDA graph")
        clr = self.lr / (1 + (st.step - 1) * self.lr_decay)
        acc = st.rows["sum"]
        old_acc = acc[rows]
        total = old_acc + grad.pow(2)
        _put(acc, rows, total, old_acc, any_rows)
        std = total.sqrt().add_(self.eps)
        w = table.weight
        old_w = w[rows]
        _put(w, rows, torch.add(old_w, grad / std, alpha=-clr), old_w, any_rows)


class _Adds:
    """``buffer[rows] += delta`` for the touched rows, as ``index_add_``: each real row gets
    one add, so the result is ``old + delta`` exactly, in any order (atomics on a GPU); the
    slots past the count add zero to rows spread over the shard. (Written as :class:`_Puts`
    does, the padding slots all write the last row: at a padded batch's size, tens of
    thousands of stores to one row serialise on a GPU.) Not for rows in pinned host memory."""

    def __init__(self, table: ShardedEmbedding, touched: Touched) -> None:
        slots = torch.arange(touched.rows.numel(), device=touched.rows.device)
        self.real = (slots < touched.count).unsqueeze(1)
        spread = slots % max(table.weight.size(0), 1)
        self.rows = torch.where(self.real.squeeze(1), touched.rows, spread)

    def add(self, buffer: Tensor, delta: Tensor, old: Tensor | None = None) -> None:
        del old  # the buffer holds it
        buffer.index_add_(0, self.rows, torch.where(self.real, delta, 0.0))


class _Puts:
    """``buffer[rows] = old + delta`` for the touched rows, every slot written (see
    :func:`_put`): rows in pinned host memory, which a GPU writes but does not add to."""

    def __init__(self, touched: Touched) -> None:
        self.rows, self.any_rows = touched.rows, touched.count > 0

    def add(self, buffer: Tensor, delta: Tensor, old: Tensor | None = None) -> None:
        """``old``: ``buffer[rows]`` where the caller read it already."""
        old = buffer[self.rows] if old is None else old
        _put(buffer, self.rows, old + delta, old, self.any_rows)


def _counter(table: ShardedEmbedding) -> Tensor:
    """A table's step count where its rows are updated (the device, for pinned host rows
    too), float64."""
    return torch.zeros((), dtype=torch.float64, device=table.device)


def _put(buffer: Tensor, rows: Tensor, new: Tensor, old: Tensor, any_rows: Tensor) -> None:
    """``buffer[rows] = new`` where the step touched any row, else the ``old`` values.

    Padding slots repeat the last touched row with its inputs, so each of a row's
    duplicates writes the same value and the scatter's order does not matter.
    """
    put_rows(buffer, rows, torch.where(any_rows, new, old))
