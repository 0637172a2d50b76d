"""The parallel pair helpers equal their one-core numpy definitions, whatever the threads."""

from __future__ import annotations

import numpy as np
import pytest

from distgnn_workload.data.distinct_pairs import first_occurrences, sorted_pair_keys
from distgnn_workload.data.host_threads import take


def _edges(seed: int, n: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # few nodes: many repeated pairs (both directions) and self-loops
    return rng.integers(0, n, e).astype(np.int64), rng.integers(0, n, e).astype(np.int64)


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize(("n", "e"), [(1, 10), (7, 500), (300, 20_000), (50_000, 30_000)])
def test_first_occurrences_are_numpy_uniques_first_indices(threads: int, n: int, e: int) -> None:
    src, dst = _edges(n + e, n, e)
    keys = np.minimum(src, dst) * n + np.maximum(src, dst)
    keys[src == dst] = -1
    _, first = np.unique(keys, return_index=True)
    expected = np.sort(first[src[first] != dst[first]])
    got = first_occurrences(src, dst, n, threads)
    assert got.dtype == np.int64
    assert np.array_equal(got, expected)


def test_first_occurrences_of_nothing_is_empty() -> None:
    empty = np.empty(0, dtype=np.int64)
    assert first_occurrences(empty, empty, 10, 3).size == 0


@pytest.mark.parametrize("threads", [1, 3])
def test_sorted_pair_keys_are_the_sorted_keys(threads: int) -> None:
    n = 200_000
    src, dst = _edges(1, n, (1 << 20) + 17)  # above the size that sorts on one core
    expected = np.sort(np.minimum(src, dst) * n + np.maximum(src, dst))
    assert np.array_equal(sorted_pair_keys(src, dst, n, threads), expected)


def test_take_gathers_rows_like_numpy() -> None:
    rng = np.random.default_rng(2)
    table = rng.standard_normal((100, 3)).astype(np.float32)
    index = rng.integers(0, 100, (37, 11))
    assert np.array_equal(take(table, index, threads=4, chunk=50), table[index])
    ids = rng.integers(0, 1000, 1000).astype(np.int32)
    flat = rng.integers(0, 1000, (9, 7))
    assert np.array_equal(take(ids, flat, threads=2, chunk=10), ids[flat])
