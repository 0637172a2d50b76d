"""A synthetic graph at any scale with labels a GNN can learn: communities with homophily.

Each class is one community. A node's class is drawn from a mildly skewed (Zipf 0.5)
distribution, its expected degree from a log-normal one (a skewed, products-like degree
distribution), and its features are its class centroid plus Gaussian noise. An edge picks
its first endpoint in proportion to expected degree; with probability ``homophily`` its
second endpoint comes from the same community, otherwise from another one, again in
proportion to expected degree (a degree-corrected stochastic block model). Duplicates and
self-loops are dropped and replaced until exactly ``num_edges`` undirected edges remain.

Centroids have norm ``CENTROID_NORM`` whatever the feature dimension. The defaults are
calibrated at ogbn-products' density (about 50 neighbours per node; 47 classes) to be as
hard as ogbn-products: a node's own features give its class about half of the time (an MLP:
0.52), and its neighbourhood carries enough to lift a 3-layer GNN to about 0.8, not to 1.
The homophily that does this (0.22) is far below products' 0.81: these features are class
centroids plus independent noise, so a mean over a few hops of neighbours averages the
noise away once ``homophily * sqrt(degree)`` passes about 1 (at 0.8 a GNN scores 0.998).
The communities are also the graph's only locality, so the low homophily makes it harder to
partition (METIS cuts about three times as many edges as at 0.8). ``benchmarks/accuracy/``
has the measured table.

Everything is generated in chunks with independent seeded streams: the same spec gives
the same bytes. Peak memory is about the final CSR (one int64 key per directed edge while
sorting) plus the features.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from distgnn_api.spec import SyntheticDataset
from distgnn_workload.data.csr import EDGE_CHUNK, chunks, csr_from_edge_keys, sort_unique_keys
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.labels import mask_fields

log = logging.getLogger(__name__)

CENTROID_NORM = 3.0
"""Norm of each class centroid; the noise has standard deviation ``feature_noise`` per dimension."""
DEGREE_SIGMA = 1.0
"""Sigma of the log-normal expected-degree distribution (median/mean = exp(-sigma^2 / 2))."""
CLASS_SKEW = 0.5
"""Zipf exponent of the class sizes."""
STUBS_PER_NODE = 8
"""Average entries per node in the degree-proportional sampling table."""
STALL_ROUNDS = 8
"""Rounds of community-aware edge sampling before the rest is filled uniformly."""

ProgressFn = Callable[[float], None]
"""Called with the share of generation done, from 0 to 1."""


def generate(spec: SyntheticDataset, *, progress: ProgressFn | None = None) -> GraphData:
    """Generate the graph of ``spec``; deterministic by ``spec.seed``."""
    n, m, f, c = spec.num_nodes, spec.num_edges, spec.num_features, spec.num_classes
    report = progress or (lambda _: None)
    _, _, r_edge, r_feature, _ = streams(spec.seed)
    table, masks = nodes(spec)
    y = table.y
    report(0.05)

    keys = _sample_edges(n, m, spec.homophily, table, r_edge, report)
    del table
    indptr, indices = csr_from_edge_keys(keys, n)
    del keys
    report(0.8)

    x = _features(y, f, c, spec.feature_noise, r_feature)
    report(1.0)
    return GraphData(
        indptr=indptr,
        indices=indices,
        x=x,
        y=y,
        **mask_fields(masks),
        num_classes=c,
        name="synthetic",
        info={"generator": "degree-corrected SBM", "homophily": spec.homophily},
    )


def streams(seed: int) -> list[np.random.Generator]:
    """The generator's five independent streams: label, degree, edge, feature, split."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)]


def nodes(spec: SyntheticDataset) -> tuple[StubTable, dict[str, npt.NDArray[np.bool_]]]:
    """The graph's classes and stub table, and its train/val/test masks (from the label,
    degree and split streams: the same whether the edges are drawn at once or streamed)."""
    n, c = spec.num_nodes, spec.num_classes
    check_edge_count(n, spec.num_edges)
    r_label, r_degree, _, _, r_split = streams(spec.seed)
    table = communities(n, c, r_label, r_degree)
    masks = _splits(n, spec.train_fraction, spec.val_fraction, r_split)
    return table, dict(zip(("train", "val", "test"), masks, strict=True))


def check_edge_count(n: int, m: int) -> None:
    """Refuse more edges than a simple graph on ``n`` nodes has."""
    max_edges = n * (n - 1) // 2
    if m > max_edges:
        raise DatasetError(
            f"numEdges={m} exceeds the {max_edges} edges a simple graph on {n} nodes can "
            "have; lower numEdges or raise numNodes",
            source="spec.dataset.synthetic",
        )


class StubTable(NamedTuple):
    """Each node's class, and the degree-proportional stub table grouped by community."""

    y: npt.NDArray[np.int64]
    stubs: npt.NDArray[Any]
    comm_start: npt.NDArray[np.int64]
    """Each community's first stub."""
    comm_stubs: npt.NDArray[np.int64]
    """Each community's stub count."""


def communities(
    n: int, c: int, r_label: np.random.Generator, r_degree: np.random.Generator
) -> StubTable:
    """Each node's class, and the degree-proportional stub table grouped by community with
    each community's first stub and stub count."""
    class_p = 1.0 / np.arange(1, c + 1, dtype=np.float64) ** CLASS_SKEW
    y = r_label.choice(c, size=n, p=class_p / class_p.sum()).astype(np.int64)
    # Expected degrees as a table of stubs: node i appears about w_i / mean(w) * STUBS times.
    w = r_degree.lognormal(0.0, DEGREE_SIGMA, size=n)
    copies = np.maximum(1, np.rint(w / w.mean() * STUBS_PER_NODE)).astype(np.int64)
    del w
    order = np.argsort(y, kind="stable")  # nodes grouped by community
    stub_index = np.repeat(order.astype(np.int32 if n < 2**31 else np.int64), copies[order])
    del copies, order
    comm_stubs = np.bincount(y[stub_index], minlength=c).astype(np.int64)
    comm_start = np.concatenate([[0], np.cumsum(comm_stubs)[:-1]])
    return StubTable(y, stub_index, comm_start, comm_stubs)


def _sample_edges(
    n: int,
    m: int,
    homophily: float,
    table: StubTable,
    rng: np.random.Generator,
    report: ProgressFn,
) -> npt.NDArray[np.int64]:
    """Exactly ``m`` distinct undirected edges as sorted keys ``min * n + max``."""
    nn = np.int64(n)
    keys = np.empty(0, dtype=np.int64)
    have = 0
    rounds = 0
    while have < m:
        rounds += 1
        # Oversample a little: duplicates and self-loops are dropped after the sort.
        want = int((m - have) * (1.05 if rounds == 1 else 1.5)) + 1024
        grown = np.empty(have + want, dtype=np.int64)
        grown[:have] = keys[:have]
        del keys
        keys = grown
        # Small or dense graphs can run out of distinct pairs of the wanted kind; after
        # STALL_ROUNDS rounds the remaining edges join uniformly random node pairs.
        uniform = rounds > STALL_ROUNDS
        if uniform and rounds == STALL_ROUNDS + 1:
            log.warning("synthetic graph too dense for its communities; filling uniformly")
        for a, b in chunks(want, EDGE_CHUNK):
            size = b - a
            if uniform:
                u = rng.integers(0, n, size).astype(table.stubs.dtype)
                v = rng.integers(0, n, size).astype(table.stubs.dtype)
            else:
                u, v = _endpoints(size, homophily, table, rng)
            lo = np.minimum(u, v).astype(np.int64)
            hi = np.maximum(u, v).astype(np.int64)
            keys[have + a : have + b] = lo * nn + hi
            report(0.05 + 0.5 * min(1.0, (have + b) / m))
        have = sort_unique_keys(keys, loops_of=n)
        log.debug("edge round %d: %d distinct edges of %d", rounds, have, m)
    if have > m:
        drop = rng.choice(have, size=have - m, replace=False)
        keep = np.ones(have, dtype=np.bool_)
        keep[drop] = False
        keys = keys[:have][keep]
    return keys[:m]


def _endpoints(
    size: int, homophily: float, table: StubTable, rng: np.random.Generator
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Endpoints of ``size`` edges: degree-proportional, same community with ``homophily``."""
    y, stubs, comm_start, comm_stubs = table
    u = stubs[rng.integers(0, len(stubs), size)]
    v = np.empty(size, dtype=stubs.dtype)
    intra = rng.random(size) < homophily
    cu = y[u[intra]]
    v[intra] = stubs[comm_start[cu] + (rng.random(len(cu)) * comm_stubs[cu]).astype(np.int64)]
    inter = np.flatnonzero(~intra)
    # Inter-community: draw from the whole table, redraw those that hit u's community
    # (a bounded number of times: with one community only, they stay intra).
    for _ in range(64):
        if not len(inter):
            break
        v[inter] = stubs[rng.integers(0, len(stubs), len(inter))]
        inter = inter[y[v[inter]] == y[u[inter]]]
    return u, v


def _features(
    y: npt.NDArray[np.int64], f: int, c: int, noise: float, rng: np.random.Generator
) -> npt.NDArray[np.float32]:
    """Class centroid (norm CENTROID_NORM) plus N(0, noise^2) per dimension, float32."""
    x = np.empty((len(y), f), dtype=np.float32)
    a = 0
    for block in feature_blocks(y, f, c, noise, rng):
        x[a : a + len(block)] = block
        a += len(block)
        del block  # one block alive at a time
    return x


def feature_blocks(
    y: npt.NDArray[np.int64], f: int, c: int, noise: float, rng: np.random.Generator
) -> Iterator[npt.NDArray[np.float32]]:
    """The rows of :func:`_features`, in blocks of about 16 MB, in node order."""
    centroids = rng.standard_normal((c, f))
    centroids *= CENTROID_NORM / np.linalg.norm(centroids, axis=1, keepdims=True)
    centroids32 = centroids.astype(np.float32)
    n = len(y)
    rows = max(1, (16 << 20) // (4 * max(1, f)))
    for a in range(0, n, rows):
        b = min(n, a + rows)
        block = rng.standard_normal((b - a, f), dtype=np.float32)
        block *= np.float32(noise)
        block += centroids32[y[a:b]]
        yield block
        del block


def _splits(
    n: int, train: float, val: float, rng: np.random.Generator
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Disjoint random train/val/test masks of the given shares (test takes the rest)."""
    perm = rng.permutation(n)
    n_train = max(1, round(train * n))
    n_val = min(n - n_train, round(val * n))
    masks = [np.zeros(n, dtype=np.bool_) for _ in range(3)]
    masks[0][perm[:n_train]] = True
    masks[1][perm[n_train : n_train + n_val]] = True
    masks[2][perm[n_train + n_val :]] = True
    return masks[0], masks[1], masks[2]
