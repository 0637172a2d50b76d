"""The two ranks of the sharded-embedding tests (a module spawned children import), and the
checks that the parent runs on what they saved.

Both ranks run one script: two featureless node types, rows owned as a partition book says,
random lookups per rank (repeated ids, a step where one rank asks for no row of a type), a
squared loss, row-sparse Adam; then bf16 rows, an out-of-range id, and a resume from a
checkpoint with Adagrad. The counts go over a second gloo group, as they go over the
control group beside NCCL on GPUs. On CPU the rows go over gloo, on GPUs over NCCL.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from distgnn_workload.embeddings import (
    LookupRangeError,
    RowExchange,
    RowOwnership,
    RowSparseAdagrad,
    RowSparseAdam,
    RowSparseOptimizer,
    ShardedEmbedding,
    initial_rows,
    load_shards,
    save_shards,
)
from distgnn_workload.runtime.checkpoint import load_latest, save_checkpoint
from tests.support.ranks import join_group, leave_group, spawn_ranks

WORLD = 2
DIM = 6
SEED = 3
LR = 0.05
STEPS = 6
RESUME_AT = 3
SIZES = {"author": 60, "institution": 5}
"""A large type (most rows untouched each step) and one whose rows every rank touches."""
RANKS_OF_PARTITION = [[0], [1], [0, 1]]

Saved = dict[str, Any]


def partition_book(node_type: str) -> Tensor:
    """A partition book over three partitions, in no order."""
    g = torch.Generator().manual_seed(len(node_type))
    return torch.randint(0, 3, (SIZES[node_type],), generator=g)


def ownership(node_type: str) -> RowOwnership:
    return RowOwnership.from_partition_book(
        node_type, partition_book(node_type), RANKS_OF_PARTITION, WORLD
    )


def ids_of(node_type: str, step: int, rank: int, part: int = 0, *, world: int = WORLD) -> Tensor:
    """Rank ``rank``'s lookup at ``step`` (``part``: a second lookup in the step): with
    repeats; the last rank asks for no author at step 2."""
    if node_type == "author" and step == 2 and rank == world - 1:
        return torch.empty(0, dtype=torch.int64)
    g = torch.Generator().manual_seed(1000 * step + 100 * part + 10 * rank + len(node_type))
    n = SIZES[node_type]
    return torch.randint(0, n, (int(n * 0.4) + 3,), generator=g)


def target(node_type: str) -> Tensor:
    """The rows that the squared loss pulls ``node_type``'s rows towards."""
    g = torch.Generator().manual_seed(7 + len(node_type))
    return torch.randn(SIZES[node_type], DIM, generator=g)


def loss_of(rows: dict[str, Tensor], step: int, rank: int) -> Tensor:
    total = torch.zeros(())
    for t, out in rows.items():
        ids = ids_of(t, step, rank)
        diff = out.float().cpu() - target(t)[ids]
        total = total + (diff**2).sum() / (ids.numel() + 1)
    return total


def initial(node_type: str) -> Tensor:
    return initial_rows(SEED, node_type, torch.arange(SIZES[node_type]), DIM)


# ---------------------------------------------------------------------- the ranks


def _tables(
    rank: int, device: torch.device, host: dist.ProcessGroup, *, seed: int = SEED
) -> list[ShardedEmbedding]:
    exchange = RowExchange(rank, WORLD, device, host_group=host)
    return [ShardedEmbedding(ownership(t), DIM, exchange, seed=seed) for t in SIZES]


def _train(
    tables: list[ShardedEmbedding], opt: RowSparseOptimizer, rank: int, steps: range
) -> list[dict[str, int]]:
    per_step = []
    for step in steps:
        tables[0].stats.reset()
        before = {t.node_type: (t.rows_looked_up, t.rows_received) for t in tables}
        rows = {t.node_type: t.lookup(ids_of(t.node_type, step, rank)) for t in tables}
        loss_of(rows, step, rank).backward()  # type: ignore[no-untyped-call]
        opt.step()
        stats = tables[0].stats.as_dict()
        for t in tables:  # the per-table counters of this step (the trainer's metrics)
            looked_up, received = before[t.node_type]
            stats[f"{t.node_type}:rows_looked_up"] = t.rows_looked_up - looked_up
            stats[f"{t.node_type}:rows_received"] = t.rows_received - received
        per_step.append(stats)
    return per_step


def _snapshot(tables: list[ShardedEmbedding], opt: RowSparseOptimizer) -> Saved:
    return {
        "rows": {t.node_type: t.rows.clone() for t in tables},
        "weight": {t.node_type: t.weight.cpu() for t in tables},
        "optimizer": opt.state_dict(),
    }


def _worker(rank: int, tmp: str, device_type: str) -> None:
    timeout = timedelta(seconds=60)
    device = join_group(
        rank, WORLD, f"file://{tmp}/store", cuda=device_type == "cuda", timeout=timeout
    )
    host = dist.new_group(backend="gloo", timeout=timeout)
    assert isinstance(host, dist.ProcessGroup)
    out: Saved = {}

    # 1. training against the single-process reference, with what was sent per step
    tables = _tables(rank, device, host)
    opt = RowSparseAdam(tables, lr=LR)
    out["per_step"] = _train(tables, opt, rank, range(STEPS))
    out["adam"] = _snapshot(tables, opt)

    # 2. bf16 rows: what comes back is the owner's fp32 row rounded, at half the bytes
    tables[0].out_dtype = torch.bfloat16
    tables[0].stats.reset()
    with torch.no_grad():
        got = tables[0].lookup(torch.arange(SIZES["author"]))
    out["bf16"] = {"rows": got.cpu(), "stats": tables[0].stats.as_dict()}
    tables[0].out_dtype = torch.float32

    # 3. an id out of range on rank 1 only: both ranks raise, then the group still works
    bad = torch.tensor([0, SIZES["author"] + 4 if rank == 1 else 1])
    try:
        tables[0].lookup(bad)
        out["range_error"] = None
    except LookupRangeError as err:
        out["range_error"] = str(err)
    with torch.no_grad():
        out["after_error"] = tables[0].lookup(torch.tensor([rank])).cpu()

    # 4. exact resume: k steps, save, fresh tables from another seed, load, the rest
    run = Path(tmp) / "run"
    straight = _tables(rank, device, host)
    straight_opt = RowSparseAdagrad(straight, lr=LR, lr_decay=0.01)
    _train(straight, straight_opt, rank, range(STEPS))
    out["straight"] = _snapshot(straight, straight_opt)
    first = _tables(rank, device, host)
    first_opt = RowSparseAdagrad(first, lr=LR, lr_decay=0.01)
    _train(first, first_opt, rank, range(RESUME_AT))
    save_shards(run, RESUME_AT, first, first_opt)
    dist.barrier(group=host)
    if rank == 0:
        save_checkpoint(run, RESUME_AT, {"model": {}})
    dist.barrier(group=host)
    resumed = _tables(rank, device, host, seed=SEED + 1)
    resumed_opt = RowSparseAdagrad(resumed, lr=LR, lr_decay=0.01)
    ckpt = load_latest(run)
    assert ckpt is not None
    load_shards(run, ckpt.epoch, resumed, resumed_opt)
    _train(resumed, resumed_opt, rank, range(ckpt.epoch, STEPS))
    out["resumed"] = _snapshot(resumed, resumed_opt)

    # 5. one process resumes the two ranks' checkpoint (resharded) and takes both their
    # lookups and losses: it ends where the two ranks ended
    if rank == 0:
        local = RowExchange.local(device)
        alone = [ShardedEmbedding(RowOwnership.single(t, n), DIM, local) for t, n in SIZES.items()]
        alone_opt = RowSparseAdagrad(alone, lr=LR, lr_decay=0.01)
        load_shards(run, RESUME_AT, alone, alone_opt)
        for step in range(RESUME_AT, STEPS):
            losses = [
                loss_of(
                    {t.node_type: t.lookup(ids_of(t.node_type, step, r)) for t in alone}, step, r
                )
                for r in range(WORLD)
            ]
            torch.stack(losses).sum().backward()  # type: ignore[no-untyped-call]
            alone_opt.step()
        out["alone"] = _snapshot(alone, alone_opt)

    torch.save(out, f"{tmp}/rank{rank}.pt")
    leave_group()


def run_ranks(tmp: Path, device_type: str = "cpu") -> list[Saved]:
    """Run both ranks to the end (in ``tmp``, created here: the ranks meet through a file
    store in it); what each saved."""
    tmp.mkdir(parents=True, exist_ok=True)
    spawn_ranks(_worker, (str(tmp), device_type), WORLD)
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


# ---------------------------------------------------------------------- the checks


def assemble(ranks: list[Saved], key: str, node_type: str) -> Tensor:
    """The whole table from the ranks' shards."""
    full = torch.full((SIZES[node_type], DIM), float("nan"))
    for r in ranks:
        full[r[key]["rows"][node_type]] = r[key]["weight"][node_type]
    assert not full.isnan().any(), "some row is owned by no rank"
    return full


def check_trains_like_one_sparse_embedding(ranks: list[Saved], *, atol: float = 1e-6) -> None:
    """``nn.Embedding(sparse=True)`` + ``SparseAdam`` on the same lookups and the sum of the
    ranks' losses ends with the same rows, moments and step counts."""
    ref = {t: nn.Embedding(n, DIM, sparse=True) for t, n in SIZES.items()}
    for t, emb in ref.items():
        with torch.no_grad():
            emb.weight.copy_(initial(t))
    opt = torch.optim.SparseAdam([e.weight for e in ref.values()], lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        losses = [
            loss_of({t: ref[t](ids_of(t, step, r)) for t in SIZES}, step, r) for r in range(WORLD)
        ]
        torch.stack(losses).sum().backward()  # type: ignore[no-untyped-call]
        opt.step()  # type: ignore[no-untyped-call]
    for t, emb in ref.items():
        got = assemble(ranks, "adam", t)
        assert not torch.equal(got, initial(t)), f"{t}: nothing was trained"
        assert torch.allclose(got, emb.weight.detach(), rtol=1e-5, atol=atol), t
        state = opt.state[emb.weight]
        for name in ("exp_avg", "exp_avg_sq"):
            full = torch.zeros(SIZES[t], DIM)
            for r in ranks:
                full[r["adam"]["rows"][t]] = r["adam"]["optimizer"]["tables"][t]["rows"][name]
            assert torch.allclose(full, state[name], rtol=1e-5, atol=atol / 10), (t, name)
        steps = {r["adam"]["optimizer"]["tables"][t]["step"] for r in ranks}
        assert steps == {state["step"]}


def check_untouched_rows_keep_their_initial_values(ranks: list[Saved]) -> None:
    touched = torch.cat([ids_of("author", s, r) for s in range(STEPS) for r in range(WORLD)])
    untouched = torch.ones(SIZES["author"], dtype=torch.bool)
    untouched[touched] = False
    assert untouched.any(), "the test must leave some rows untouched"
    got = assemble(ranks, "adam", "author")
    assert torch.equal(got[untouched], initial("author")[untouched])
    assert not torch.equal(got[~untouched], initial("author")[~untouched])


def check_only_touched_rows_are_sent_read_and_updated(ranks: list[Saved]) -> None:
    """Recount, from the lookups and the ownership alone, what each rank had to send, and
    per table the distinct rows it looked up and those other ranks sent it."""
    owners = {t: ownership(t).owner for t in SIZES}
    for step in range(STEPS):
        distinct = {(t, r): torch.unique(ids_of(t, step, r)) for t in SIZES for r in range(WORLD)}
        for me in range(WORLD):
            want = dict.fromkeys(
                ("ids_sent", "rows_sent", "grad_rows_sent", "rows_read", "rows_updated"), 0
            )
            for t in SIZES:
                mine = distinct[(t, me)]
                asked = int((owners[t][mine] != me).sum())  # my distinct ids owned elsewhere
                served = sum(
                    int((owners[t][distinct[(t, r)]] == me).sum()) for r in range(WORLD) if r != me
                )
                union = torch.unique(torch.cat([distinct[(t, r)] for r in range(WORLD)]))
                want[f"{t}:rows_looked_up"] = mine.numel()
                want[f"{t}:rows_received"] = asked
                want["ids_sent"] += asked
                want["rows_sent"] += served
                want["grad_rows_sent"] += asked
                want["rows_read"] += served + int((owners[t][mine] == me).sum())
                want["rows_updated"] += int((owners[t][union] == me).sum())
            got = ranks[me]["per_step"][step]
            assert {k: got[k] for k in want} == want, (step, me)
            assert got["lookups"] == len(SIZES)
            assert got["bytes_sent"] == want["ids_sent"] * 8 + 4 * DIM * (
                want["rows_sent"] + want["grad_rows_sent"]
            )


def check_bf16_rows(ranks: list[Saved]) -> None:
    """bf16 lookups return the owners' fp32 rows rounded, at half the row bytes."""
    full = assemble(ranks, "adam", "author")
    owner = ownership("author").owner
    for me, r in enumerate(ranks):
        rows = r["bf16"]["rows"]
        assert rows.dtype == torch.bfloat16
        assert torch.equal(rows, full.to(torch.bfloat16))
        stats = r["bf16"]["stats"]
        assert stats["ids_sent"] == int((owner != me).sum())
        assert stats["rows_sent"] == int((owner == me).sum())
        assert stats["bytes_sent"] == stats["ids_sent"] * 8 + stats["rows_sent"] * DIM * 2


def check_range_error(ranks: list[Saved]) -> None:
    """Both ranks raise (rank 1 naming the id, rank 0 naming rank 1); no rank hangs."""
    culprit, other = ranks[1]["range_error"], ranks[0]["range_error"]
    assert culprit is not None
    assert "'author'" in culprit
    assert str(SIZES["author"] + 4) in culprit
    assert f"0..{SIZES['author'] - 1}" in culprit
    assert other is not None
    assert "'author'" in other
    assert "[1]" in other
    full = assemble(ranks, "adam", "author")
    for me, r in enumerate(ranks):
        assert torch.equal(r["after_error"], full[me : me + 1])


def check_resume_is_bit_exact(ranks: list[Saved]) -> None:
    for r in ranks:
        straight, resumed = r["straight"], r["resumed"]
        for t in SIZES:
            assert torch.equal(straight["weight"][t], resumed["weight"][t]), t
            a = straight["optimizer"]["tables"][t]
            b = resumed["optimizer"]["tables"][t]
            assert a["step"] == b["step"] == STEPS
            assert torch.equal(a["rows"]["sum"], b["rows"]["sum"])
            assert not torch.equal(straight["weight"][t], initial(t)[r["straight"]["rows"][t]])


def check_one_process_resumes_the_two_ranks_checkpoint(ranks: list[Saved]) -> None:
    alone = ranks[0]["alone"]
    for t in SIZES:
        want = assemble(ranks, "straight", t)
        assert torch.allclose(alone["weight"][t], want, rtol=1e-5, atol=1e-6), t
        total = torch.zeros(SIZES[t], DIM)
        for r in ranks:
            total[r["straight"]["rows"][t]] = r["straight"]["optimizer"]["tables"][t]["rows"]["sum"]
        got = alone["optimizer"]["tables"][t]
        assert torch.allclose(got["rows"]["sum"], total, rtol=1e-5, atol=1e-6), t
        assert got["step"] == STEPS
