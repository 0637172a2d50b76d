"""Ranks of the trainers' feature exchange as real processes (gloo on CPU, NCCL on GPUs).

Each rank holds one block of the node ids (one holder) and a hot cache of a different size
(none at all on rank 1). Its worker-mode pipeline samples the replicated topology and
gathers through :class:`DistributedFeatureSource` over the exchange: a training phase with
as many batches on every rank, then evaluation phases whose batch counts differ by rank
(rank 0 has none), with and without the prefetch thread. Every row a rank receives must
equal the replicated table's, and the inline phase's feature path must read nothing back
on the loader's thread (:class:`HostSyncCounter`).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from distgnn_workload.partition import PartitionStore, write_partitions
from distgnn_workload.runtime.batches import LocalPipeline
from distgnn_workload.runtime.distributed_sampler import replicated_factory
from distgnn_workload.runtime.features.cache_policy import fill_cache_from
from distgnn_workload.runtime.features.exchange import FeatureExchange
from distgnn_workload.runtime.features.layout import HolderLayout, load_holder, load_labels
from distgnn_workload.runtime.features.remote import DistributedFeatureSource
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.host_syncs import HostSyncCounter
from distgnn_workload.runtime.seeds import Batch
from tests.support.random_graph import random_graph
from tests.support.ranks import join_group, leave_group, run_rank_processes

CPU = torch.device("cpu")
NODES = 600
PARTITIONS = 12  # divisible by 2, 3 and 4 holders
BATCH = 16
TIER_ROWS = 30
"""Rows of a tiered table's GPU tier (of about 300 held per rank on 2 ranks)."""
JOIN_S = 180.0
"""Longer than any healthy run; a rank still alive past it hangs (the test fails)."""


def write_store(path: Path) -> PartitionStore:
    """The graph in ``PARTITIONS`` partitions of interleaved ids."""
    return write_partitions(
        path,
        random_graph(NODES, 4000, 7, seed=3),
        PARTITIONS,
        assignment=np.arange(NODES) % PARTITIONS,
    )


def _phase(
    pipeline: LocalPipeline, seeds: list[Tensor], reference: Tensor, rank: int
) -> dict[str, int]:
    """Run one phase through the pipeline; count the batches and the rows that differ."""
    batches: list[Batch] = [(rank, s) for s in seeds]
    got = {"batches": 0, "rows": 0, "wrong": 0}
    for batch in pipeline.epoch(batches):
        ids = batch.hop.node_ids
        got["batches"] += 1
        got["rows"] += int(ids.numel())
        got["wrong"] += int((batch.x != reference[ids]).any(dim=1).sum())
    return got


def _rank(
    rank: int, world: int, store_path: str, out: str, lost: int, cuda: bool, tiered: bool
) -> None:
    """One trainer (on GPU ``rank`` with ``cuda``: NCCL); ``lost`` >= 0: that rank dies after
    one evaluation batch of the last phase; ``tiered``: a GPU budget of :data:`TIER_ROWS`
    rows, the others in pinned host memory (rows served to peers come from both tiers)."""
    torch.set_num_threads(1)
    device = join_group(
        rank, world, f"file://{out}/store", cuda=cuda, timeout=timedelta(seconds=120)
    )
    store = PartitionStore.open(Path(store_path))
    layout = HolderLayout.from_store(store, world)
    data = load_holder(store, rank, world, CPU if tiered else device)
    owned = data.end - data.start
    budget = TIER_ROWS * data.features.shape[1] * data.features.element_size()
    table = FeatureTable.for_holder(
        data,
        layout.num_nodes,
        device,
        device_budget=budget if tiered else None,
        capacity=owned + 40 * (world + 1),
    )
    reference = torch.cat(
        [load_holder(store, h, world, device).features for h in range(world)]
    )  # the replicated table
    exchange = FeatureExchange.on_new_group(table, layout, list(range(world)), 600.0)
    source = DistributedFeatureSource(table, layout, _no_rpc, holder=rank)
    # a hot cache of a different size on every rank, none on rank 1
    remote = torch.cat([torch.arange(0, data.start), torch.arange(data.end, layout.num_nodes)])
    hot = remote[torch.randperm(remote.numel(), generator=torch.Generator().manual_seed(rank))]
    fill_cache_from(table, exchange.fetch_all, hot[: 0 if rank == 1 else 40 * (rank + 1)])
    # hotness: the ids in a rank's own shuffled order
    table.place(torch.randperm(layout.num_nodes, generator=torch.Generator().manual_seed(rank)))
    source.use(exchange)
    cached = hot[: table.num_cached].to(device)
    cached_ok = bool((table.gather(table.slot[cached]) == reference[cached]).all().item())
    sampler = replicated_factory(store, [4, 3], device)(rank)
    sampler.prepare(BATCH)  # a GPU sampler captures its graph here, not on the loader thread
    own = data.train_ids
    results: dict[str, Any] = {
        "cached_ok": cached_ok,
        "cached": table.num_cached,
        "tiers": (table.device_rows, table.host_rows),
    }
    phases = [
        ("train", 4, [own[i * BATCH : (i + 1) * BATCH] for i in range(3)]),
        # uneven: rank r has 2r batches (rank 0 none), inline and through the thread
        ("eval_inline", 0, [own[i : i + BATCH] for i in range(2 * rank)]),
        ("eval", 2, [own[i : i + BATCH] for i in range(2 * rank + 1)]),
    ]
    try:
        for name, prefetch, seeds in phases:
            pipeline = LocalPipeline(
                sampler, source, load_labels(store, device), device=device, prefetch=prefetch
            )
            if rank == lost and name == "eval":
                pipeline.start(seeds[0])  # one round, then gone without a word
                sys.stdout.flush()
                os._exit(17)
            if prefetch:
                results[name] = _phase(pipeline, seeds, reference, rank)
                continue
            # inline: the loader's work runs on this thread, where the counter sees it
            with HostSyncCounter() as syncs:
                results[name] = _phase(pipeline, seeds, reference, rank)
            results["feature_syncs"] = [
                f"{s.op} {s.where}" for s in syncs.calls if s.where.startswith("runtime/features/")
            ]
        lookups, hits, _ = source.stats.take()
        results.update(lookups=lookups, hits=hits, misses=lookups - hits)
        results["rounds"] = exchange.moved.rounds
        results["bytes_in"] = exchange.moved.rows_in
    except Exception as err:  # the lost-rank case: what failed, and that it did
        results["error"] = f"{type(err).__name__}: {err}"
        torch.save(results, Path(out) / f"rank{rank}.pt")
        sys.stdout.flush()
        os._exit(3)
    torch.save(results, Path(out) / f"rank{rank}.pt")
    leave_group()


def _no_rpc(holder: int, ids: Tensor) -> Any:
    raise AssertionError("worker mode fetches over the exchange, never over RPC")


def spawn_ranks(
    world: int,
    store: PartitionStore,
    out: Path,
    *,
    lost: int = -1,
    cuda: bool = False,
    tiered: bool = False,
) -> list[int | None]:
    """Run :func:`_rank` in ``world`` processes; their exit codes (None: still running)."""
    return run_rank_processes(
        _rank, lambda r: (r, world, str(store.path), str(out), lost, cuda, tiered), world, JOIN_S
    )


def check_ranks(tmp_path: Path, world: int, *, tiered: bool = False) -> None:
    """What every rank of a healthy run saved must hold (see the module's docstring)."""
    saved = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(world)]
    for rank, s in enumerate(saved):
        if tiered:
            assert s["tiers"][0] == TIER_ROWS
            assert s["tiers"][1] > 0
        else:
            assert s["tiers"][1] == 0
        assert s["cached_ok"]
        assert s["cached"] == (0 if rank == 1 else 40 * (rank + 1))
        assert s["train"]["batches"] == 3
        assert s["eval_inline"]["batches"] == 2 * rank
        assert s["eval"]["batches"] == 2 * rank + 1
        for phase in ("train", "eval_inline", "eval"):
            assert s[phase]["wrong"] == 0, (rank, phase)
        # starting a batch's round and filling its rows in read nothing back on the loader's
        # thread (the round's own read-back of the counts runs on the exchange's thread); a
        # tiered table's gather splits its tiers by a mask on CPU only (a kernel on a GPU)
        allowed = ("runtime/features/tiers.py",) if tiered else ()
        syncs = [x for x in s["feature_syncs"] if not x.split()[1].startswith(allowed)]
        assert syncs == [], (rank, syncs)
        assert s["misses"] > 0  # rows came over the exchange
        assert s["bytes_in"] > 0
        if rank != 1:
            assert s["hits"] > 0  # and some from the hot cache
    # every rank took part in the same rounds: each phase as long as its longest rank's
    assert len({s["rounds"] for s in saved}) == 1
