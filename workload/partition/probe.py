"""A sampling probe of a written store: what the job's mini-batches will look like.

The capacity plan's traffic model cannot tell from counts alone how many distinct nodes a
mini-batch reaches: communities and skewed degrees make batches overlap far more than
uniform draws would (1.6 times fewer distinct nodes on the synthetic products-shaped
graph). So the partition Job samples a few batches the way holder 0 will (its partitions'
training nodes as seeds, the job's batch size and fanouts, neighbours drawn without
replacement) and records in META.json, per batch: the distinct nodes, the remote ones (owned
by another holder) and the share of those a hot cache of ``cacheRatio`` of the remote nodes,
chosen by the same pre-sampled hotness as the runtime's, would serve. ``distgnn plan
--meta`` uses the figures when the batch size, fanouts and holders match its spec.

numpy only, on the store's memory-mapped CSR: it reads the rows it samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.contract import partitions_of_holder
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.partition.store import PartitionStore

META_KEY = "sampling_probe"
"""META.json's key of the probe's figures (distgnn_api.graph_size_sources reads it)."""
PROBE_BATCHES = 16
"""Batches whose figures are averaged (after as many that rank the hot cache)."""
MAX_PROBE_DRAWS = 1 << 24
"""Skip the probe when one batch would draw more neighbours than this (memory bound)."""


def sample_hops(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[Any],
    seeds: npt.NDArray[np.int64],
    fanouts: list[int],
    rng: np.random.Generator,
) -> npt.NDArray[np.int64]:
    """The nodes of one batch (seeds first, then each hop's sampled neighbours, repeats
    included): up to ``fanout`` neighbours of each frontier node, without replacement."""
    out = [seeds]
    frontier = seeds
    for f in fanouts:
        start = indptr[frontier]
        deg = indptr[frontier + 1] - start
        small = deg <= f
        sizes = np.minimum(deg, f)
        offs = np.cumsum(sizes) - sizes  # each row's place in the hop, in frontier order
        pos = np.empty(int(sizes.sum()), dtype=np.int64)
        # Rows of at most f neighbours give all of them; the others f distinct positions.
        within = _ranges(deg[small])
        pos[np.repeat(offs[small], deg[small]) + within] = (
            np.repeat(start[small], deg[small]) + within
        )
        if not small.all():
            big = (offs[~small, None] + np.arange(f)).reshape(-1)
            pos[big] = (start[~small, None] + _floyd(deg[~small], f, rng)).reshape(-1)
        frontier = np.asarray(indices[pos], dtype=np.int64)
        out.append(frontier)
        if len(frontier) == 0:
            break
    return np.concatenate(out)


def _ranges(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of ``arange(l)`` for each length."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _floyd(d: npt.NDArray[np.int64], f: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """[rows, f] distinct uniform positions in [0, d) per row (Floyd's algorithm, d > f)."""
    chosen = np.empty((len(d), f), dtype=np.int64)
    for i in range(f):
        j = d - f + i
        t = (rng.random(len(d)) * (j + 1)).astype(np.int64)
        taken = (chosen[:, :i] == t[:, None]).any(axis=1)
        chosen[:, i] = np.where(taken, j, t)
    return chosen


def probe(store: PartitionStore, spec: DistGNNJobSpec, seed: int = 0) -> dict[str, Any] | None:
    """The probe's figures for META.json, or None when the batches would be too large."""
    m = store.meta
    fanouts = [f if f > 0 else 1 << 30 for f in spec.model.fanout]
    batch = spec.training.batch_size
    draws = batch
    for f in fanouts:
        draws *= min(f, max(1, 2 * m.num_edges // max(1, m.num_nodes)))
    if draws > MAX_PROBE_DRAWS or m.num_nodes == 0:
        return None
    holders = spec.num_holders
    parts = (
        partitions_of_holder(0, m.num_partitions, holders) if holders <= m.num_partitions else [0]
    )
    start, end = m.offsets[parts[0]], m.offsets[parts[-1] + 1]
    train = np.concatenate(
        [np.flatnonzero(np.asarray(store.partition(p).train_mask)) + m.offsets[p] for p in parts]
    )
    if len(train) == 0:
        return None
    indptr, indices = store.topology()
    indptr = np.asarray(indptr)
    rng = np.random.default_rng(seed)
    order = rng.permutation(train)
    batches = [order[a : a + batch] for a in range(0, len(order), batch)][: 2 * PROBE_BATCHES]
    # The first half ranks the hot cache, as the runtime's pre-sampling does; the second
    # half is measured against it (all of them when there are too few for both).
    rank_with = batches[: max(1, len(batches) // 2)]
    measure = batches[len(batches) // 2 :] or batches
    counts = np.zeros(m.num_nodes, dtype=np.int64)
    for seeds in rank_with:
        counts += np.bincount(
            sample_hops(indptr, indices, seeds, fanouts, rng), minlength=m.num_nodes
        )
    num_remote = m.num_nodes - (end - start)
    budget = round(spec.samplers.cache_ratio * num_remote)
    degrees = np.diff(indptr).astype(np.float64)
    score = counts + degrees / (2.0 * max(1.0, float(degrees.max(initial=1.0))))
    score[start:end] = -1.0
    hot = np.zeros(m.num_nodes, dtype=np.bool_)
    if budget >= num_remote:
        hot[:] = True
    elif budget > 0:
        hot[np.argpartition(-score, budget - 1)[:budget]] = True
    distinct, remote, hits = [], [], []
    for seeds in measure:
        nodes = np.unique(sample_hops(indptr, indices, seeds, fanouts, rng))
        far = nodes[(nodes < start) | (nodes >= end)]
        distinct.append(len(nodes))
        remote.append(len(far))
        hits.append(int(np.count_nonzero(hot[far])))
    return {
        "holders": holders,
        "batch_size": batch,
        "fanout": list(spec.model.fanout),
        "cache_ratio": spec.samplers.cache_ratio,
        "batches": len(measure),
        "distinct_nodes": float(np.mean(distinct)),
        "remote_nodes": float(np.mean(remote)),
        "cache_hit_rate": float(sum(hits) / max(1, sum(remote))),
    }
