"""The first occurrence of each unordered pair in a list of directed edges, self-loops
dropped, on all the host's cores.

``np.unique(keys, return_index=True)`` does this with one stable sort of every key on one
core (seconds per 10M edges). Here the pairs are first bucketed by their smaller end (a
stable radix sort of a small bucket id keeps the draw order inside each bucket), then each
bucket finds its first occurrences on its own thread: the same answer, in parallel.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.host_threads import host_threads, run_parallel

IdArray = npt.NDArray[np.int64]
BUCKETS_PER_THREAD = 4


def first_occurrences(
    src: IdArray, dst: IdArray, num_nodes: int, threads: int | None = None
) -> IdArray:
    """Sorted positions of the first occurrence of each unordered pair ``{src, dst}``,
    self-loops excluded (as ``np.unique(min*n + max, return_index=True)`` on the
    non-loops, sorted)."""
    threads = host_threads() if threads is None else threads
    e = len(src)
    if e == 0:
        return np.empty(0, dtype=np.int64)
    n = np.int64(max(1, num_nodes))
    buckets = max(1, min(1 << 15, threads * BUCKETS_PER_THREAD, num_nodes))
    lo = np.minimum(src, dst)
    bucket = ((lo * buckets) // n).astype(np.uint16)
    order = np.argsort(bucket, kind="stable")  # radix sort: positions ascending per bucket
    bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
    del bucket
    keep = np.zeros(e, dtype=np.bool_)

    def task(b: int) -> None:
        ix = order[bounds[b] : bounds[b + 1]]
        ix = ix[src[ix] != dst[ix]]
        keys = lo[ix] * n + np.maximum(src[ix], dst[ix])
        _, first = np.unique(keys, return_index=True)  # the lowest position of each key
        keep[ix[first]] = True

    run_parallel(task, [(b,) for b in range(buckets)], threads)
    return np.flatnonzero(keep).astype(np.int64, copy=False)


def sorted_pair_keys(
    src: IdArray, dst: IdArray, num_nodes: int, threads: int | None = None
) -> IdArray:
    """``np.sort(min * n + max)`` of the pairs, sorted on all cores: keys bucketed by their
    smaller end are contiguous ranges of the key space, so sorted buckets in order are sorted."""
    threads = host_threads() if threads is None else threads
    n = np.int64(max(1, num_nodes))
    lo = np.minimum(src, dst)
    keys = lo * n + np.maximum(src, dst)
    buckets = max(1, min(1 << 15, threads * BUCKETS_PER_THREAD, num_nodes))
    if threads == 1 or len(keys) < (1 << 20):
        keys.sort()
        return keys
    bucket = ((lo * buckets) // n).astype(np.uint16)
    del lo
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
    del bucket
    out = np.take(keys, order)
    del order, keys

    def task(b: int) -> None:
        out[bounds[b] : bounds[b + 1]].sort()

    run_parallel(task, [(b,) for b in range(buckets)], threads)
    return out
