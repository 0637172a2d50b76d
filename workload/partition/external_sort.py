"""External-memory bucket sort of a graph's edges by (new source id, new target id).

The out-of-core writer relabels nodes so that partition p owns the new ids
``[offsets[p], offsets[p+1])``. :class:`EdgeBuckets` cuts the new id range into buckets of
consecutive rows, aligned on the partitions and sized to hold about ``budget`` directed
edges each; :meth:`EdgeBuckets.add` spills each directed edge (both directions of every
pair, self-loops dropped) to its bucket's temporary file as a (source, target) pair of
node ids. :meth:`EdgeBuckets.rows` then reads the buckets back in row order, each sorted by
(source, target) with duplicates dropped: the rows of the CSR, one bucket in memory at a
time. A bucket that came out larger than twice the budget (skewed degrees) is read in
several passes over its file, one range of its rows each, so memory stays bounded.
"""

from __future__ import annotations

import math
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.csr import EDGE_CHUNK

BUCKET_EDGES = 16 << 20
"""Directed edges per bucket: about 40 bytes each while a bucket is sorted (640 MB)."""


@dataclass(frozen=True)
class RowBlock:
    """Sorted, distinct out-edges of the rows ``[start, end)`` (new ids)."""

    start: int
    end: int
    degrees: npt.NDArray[np.int64]
    """[end - start] edges per row."""
    targets: npt.NDArray[Any]
    """Targets row after row, each row ascending."""


def bucket_bounds(
    offsets: npt.NDArray[np.int64], edges_hint: int, budget: int
) -> npt.NDArray[np.int64]:
    """Row boundaries of the buckets: every partition's range cut into equal runs of rows
    expected to hold about ``budget`` directed edges (``edges_hint`` in all)."""
    n = int(offsets[-1])
    bounds = [0]
    for p in range(len(offsets) - 1):
        start, end = int(offsets[p]), int(offsets[p + 1])
        expected = edges_hint * (end - start) / n if n else 0
        pieces = max(1, math.ceil(expected / budget))
        cuts = np.linspace(start, end, pieces + 1).round().astype(np.int64)[1:]
        bounds.extend(int(c) for c in cuts if c > bounds[-1])
    return np.asarray(bounds, dtype=np.int64)


def _raise_open_files_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = hard if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class EdgeBuckets:
    """Directed edges spilled to per-bucket files under ``folder``; see the module doc."""

    def __init__(
        self, folder: Path, bounds: npt.NDArray[np.int64], num_nodes: int, budget: int
    ) -> None:
        self.folder = folder
        self.bounds = bounds
        self.num_nodes = num_nodes
        self.budget = budget
        idx = np.int32 if num_nodes <= np.iinfo(np.int32).max else np.int64
        self.pair = np.dtype([("src", idx), ("dst", idx)])
        self.sizes = np.zeros(len(bounds) - 1, dtype=np.int64)
        self.self_loops = 0
        folder.mkdir(parents=True, exist_ok=True)
        _raise_open_files_limit(len(bounds) + 64)
        self._files: list[BinaryIO] = [
            open(self._path(b), "wb", buffering=1 << 20)  # noqa: SIM115 (closed in close())
            for b in range(len(bounds) - 1)
        ]

    def _path(self, b: int) -> Path:
        return self.folder / f"bucket-{b:05d}.bin"

    def add(self, src: npt.NDArray[Any], dst: npt.NDArray[Any]) -> None:
        """Spill the pairs (src, dst) in new ids, in both directions, self-loops dropped."""
        loop = src == dst
        if loop.any():
            self.self_loops += int(np.count_nonzero(loop))
            src, dst = src[~loop], dst[~loop]
        pairs = np.empty(2 * len(src), dtype=self.pair)
        pairs["src"][: len(src)] = src
        pairs["src"][len(src) :] = dst
        pairs["dst"][: len(src)] = dst
        pairs["dst"][len(src) :] = src
        bucket = np.searchsorted(self.bounds, pairs["src"], side="right") - 1
        order = np.argsort(bucket, kind="stable")
        counts = np.bincount(bucket, minlength=len(self._files))
        pairs = pairs[order]
        at = 0
        for b in np.flatnonzero(counts):
            size = int(counts[b])
            self._files[b].write(pairs[at : at + size].tobytes())
            at += size
        self.sizes += counts

    def close(self) -> None:
        for f in self._files:
            f.close()

    def rows(self) -> Iterator[RowBlock]:
        """The buckets in row order, sorted and without duplicates; each file is deleted
        once read."""
        self.close()
        for b in range(len(self.bounds) - 1):
            start, end = int(self.bounds[b]), int(self.bounds[b + 1])
            path = self._path(b)
            size = int(self.sizes[b])
            passes = max(1, math.ceil(size / (2 * self.budget)))
            if passes == 1:
                yield self._sorted(np.fromfile(path, dtype=self.pair), start, end)
            else:
                pairs = np.memmap(path, dtype=self.pair, mode="r")
                cuts = np.linspace(start, end, passes + 1).round().astype(np.int64)
                for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                    yield self._sorted(_select_rows(pairs, lo, hi), lo, hi)
                del pairs
            path.unlink()

    def _sorted(self, pairs: npt.NDArray[Any], start: int, end: int) -> RowBlock:
        n = np.int64(self.num_nodes)
        keys = pairs["src"].astype(np.int64)
        keys -= start
        keys *= n
        keys += pairs["dst"]
        del pairs
        keys.sort()
        if len(keys):
            keep = np.empty(len(keys), dtype=np.bool_)
            keep[0] = True
            np.not_equal(keys[1:], keys[:-1], out=keep[1:])
            keys = keys[keep]
            del keep
        rows, targets = np.divmod(keys, n)
        del keys
        degrees = np.bincount(rows, minlength=end - start).astype(np.int64)
        return RowBlock(start, end, degrees, targets.astype(self.pair["dst"]))


def _select_rows(pairs: npt.NDArray[Any], lo: int, hi: int) -> npt.NDArray[Any]:
    """The pairs whose source lies in [lo, hi), scanning ``pairs`` in chunks."""
    found = []
    for a in range(0, len(pairs), 4 * EDGE_CHUNK):
        block = np.asarray(pairs[a : a + 4 * EDGE_CHUNK])
        sel = (block["src"] >= lo) & (block["src"] < hi)
        found.append(block[sel])
    return np.concatenate(found) if found else np.zeros(0, dtype=pairs.dtype)
