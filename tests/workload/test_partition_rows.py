"""A partition's neighbour lists in new ids: sorted in slices of whole rows on several
threads, they equal one global sort of the (row, neighbour) keys."""

from __future__ import annotations

import numpy as np
import pytest

from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.host_threads import ENV_THREADS
from distgnn_workload.partition import relabel


@pytest.mark.parametrize("threads", ["1", "3"])
def test_rows_in_new_ids_equal_one_global_sort(
    monkeypatch: pytest.MonkeyPatch, threads: str
) -> None:
    monkeypatch.setenv(ENV_THREADS, threads)
    rng = np.random.default_rng(4)
    n = 500
    src, dst = rng.integers(0, n, 6000), rng.integers(0, n, 6000)
    keep = src != dst
    zeros = np.zeros(n, dtype=bool)
    x = np.zeros((n, 2), dtype=np.float32)
    graph = GraphData.from_edges(
        src[keep], dst[keep], x, np.zeros(n, dtype=np.int64), ~zeros, zeros, zeros
    )
    new_of_old = rng.permutation(n).astype(np.int32)
    olds = np.sort(rng.choice(n, 200, replace=False)).astype(np.int32)
    got = relabel.rows_in_new_ids(graph, olds, new_of_old, n)
    expected = []
    for old in olds:
        row = graph.indices[graph.indptr[old] : graph.indptr[old + 1]]
        expected.append(np.sort(new_of_old[row]))
    assert got.dtype == new_of_old.dtype
    assert np.array_equal(got, np.concatenate(expected))
    empty = relabel.rows_in_new_ids(graph, olds[:0], new_of_old, n)
    assert empty.size == 0
