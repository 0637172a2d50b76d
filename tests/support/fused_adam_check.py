"""Run as a script under ``TRITON_INTERPRET=1``: the fused row-sparse Adam kernel on CPU
tensors (Triton's interpreter) against :class:`RowSparseAdam`'s tensor operations, over
several steps of padded touched rows (none touched in one): the moments equal, the weights
within a rounding (the interpreter's scalars are float64). Exits non-zero with the first
difference."""

from __future__ import annotations

import torch

from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from distgnn_workload.embeddings.routes import Touched
from tests.support.interpreted import check_main


def _table(width: int) -> ShardedEmbedding:
    return ShardedEmbedding(RowOwnership.single("t", 40), width, RowExchange.local(), seed=3)


def check() -> str | None:
    torch.manual_seed(0)
    for width in (5, 128, 300):  # under one tile, one tile, wider than one tile
        tables = {fused: _table(width) for fused in (False, True)}
        opts = {f: RowSparseAdam([t], lr=0.05, fused=f) for f, t in tables.items()}
        for step, count in enumerate((7, 0, 12, 1, 12)):
            slots = 16
            rows = torch.randperm(40)[:slots]
            rows[count:] = rows[max(count - 1, 0)]  # padding repeats the last touched row
            grad = torch.randn(slots, width)
            touched = Touched(rows, grad, torch.tensor(count))
            for fused, opt in opts.items():
                st = opt.state["t"]
                st.step += 1
                st.counter.add_(1)
                opt._update(tables[fused], touched, st)
            plain, fused_table = tables[False], tables[True]
            for name in ("exp_avg", "exp_avg_sq"):
                a, b = opts[False].state["t"].rows[name], opts[True].state["t"].rows[name]
                if not torch.equal(a, b):
                    return f"width {width} step {step}: {name} differs by {(a - b).abs().max()}"
            if not torch.allclose(plain.weight, fused_table.weight, rtol=1e-6, atol=1e-7):
                diff = (plain.weight - fused_table.weight).abs().max()
                return f"width {width} step {step}: the weights differ by {diff}"
            untouched = torch.ones(40, dtype=torch.bool)
            untouched[rows[:count]] = False
            start = _table(width).weight
            if step == 0 and not torch.equal(fused_table.weight[untouched], start[untouched]):
                return f"width {width}: a row no slot touched changed"
    return None


if __name__ == "__main__":
    check_main(check, "fused adam: the kernel equals the tensor operations")
