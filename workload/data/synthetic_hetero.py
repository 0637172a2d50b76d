"""A synthetic heterogeneous graph shaped like ogbn-mag, at any scale, with labels a
relational GNN can learn but not trivially.

Node types, feature widths, relations, edge counts, classes and split shares are ogbn-mag's
at ``scale`` 1.0; :mod:`distgnn_api.mag_shape` holds them (one copy, shared with admission).

Every node has a latent community, one per class, drawn from a skewed (Zipf 0.5)
distribution; communities form groups of ``GROUP_SIZE`` related ones (fields). A paper's
label is its community, except with probability ``label_noise``, where it is another
community of the same group: no model can recover those, so accuracy is capped near
``1 - label_noise`` (about 60%), as venue prediction on the real data is. Paper features
are the community's centroid (norm ``CENTROID_NORM``) plus unit Gaussian noise: on its own,
a paper's features tell its community about a third of the time with 349 classes. Each
relation joins nodes of the same community with the probability ``HOMOPHILY`` gives it,
otherwise random ones; endpoints are drawn in proportion to log-normal expected degrees
(skewed, as the real degree distributions are). Duplicate edges and self-loops are
replaced until each relation has exactly its edge count; reverse relations are then added
as PyG's ``ToUndirected`` adds them. The train/val/test shares of papers are ogbn-mag's
time split's (85.5% / 8.8% / 5.7%), drawn at random: at scale 1.0 the same
counts.

Deterministic by seed: each part draws from its own seeded stream, in fixed-size chunks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType
from distgnn_api.mag_shape import (
    MAG_NODE_TYPES,
    MAG_NUM_CLASSES,
    MAG_PAPERS,
    MAG_RELATIONS,
    MAG_SPLIT,
    MAG_TARGET_NODE_TYPE,
    scaled_count,
)
from distgnn_workload.data.csr import (
    EDGE_CHUNK,
    chunks,
    index_dtype,
    sort_unique_keys,
    typed_csr_from_edges,
)
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData

log = logging.getLogger(__name__)

MAG_NODES: Final = {t.name: t.num_nodes for t in MAG_NODE_TYPES}
MAG_EDGES: Final[dict[EdgeType, int]] = dict(MAG_RELATIONS)
"""Relations and edge counts, in PyG's ``OGB_MAG`` order (reverses follow in the same order)."""
MAG_CLASSES: Final = MAG_NUM_CLASSES
TARGET: Final = MAG_TARGET_NODE_TYPE
MAG_FEATURES: Final = {t.name: t.num_features for t in MAG_NODE_TYPES}[TARGET]
SPLIT_SHARES: Final = (MAG_SPLIT["train"] / MAG_PAPERS, MAG_SPLIT["valid"] / MAG_PAPERS)
"""Train and validation shares of ogbn-mag's time split; test takes the rest."""

HOMOPHILY: Final[dict[EdgeType, float]] = {
    ("author", "writes", "paper"): 0.75,
    ("paper", "cites", "paper"): 0.6,
    ("paper", "has_topic", "field_of_study"): 0.5,
    ("author", "affiliated_with", "institution"): 0.4,
}
"""Probability that an edge joins two nodes of the same community."""
DEGREE_SIGMA: Final = {"paper": 1.0, "author": 1.0, "institution": 1.5, "field_of_study": 1.5}
"""Sigma of each type's log-normal expected-degree distribution."""
CENTROID_NORM: Final = 2.5
CLASS_SKEW: Final = 0.5
GROUP_SIZE: Final = 10
STUBS_PER_NODE: Final = 8
MAX_ROUNDS: Final = 64

ProgressFn = Callable[[float], None]


@dataclass(frozen=True)
class SyntheticHeteroConfig:
    """What to generate: ogbn-mag's shape times ``scale``, with these labels and features."""

    scale: float = 1.0
    """Multiplies every node and edge count (1.0: ogbn-mag's size)."""
    seed: int = 0
    num_classes: int = MAG_CLASSES
    num_features: int = MAG_FEATURES
    label_noise: float = 0.4
    """Share of papers whose label is a related community, not their own."""
    add_reverse: bool = True
    """Add reverse relations as ``ToUndirected`` does (False: each relation as drawn)."""

    def node_counts(self) -> dict[str, int]:
        return {t: scaled_count(n, self.scale) for t, n in MAG_NODES.items()}

    def edge_counts(self) -> dict[EdgeType, int]:
        return {et: scaled_count(m, self.scale) for et, m in MAG_EDGES.items()}

    def check(self) -> None:
        where = "spec.dataset.syntheticMag"
        if not self.scale > 0:
            raise DatasetError(f"scale must be positive, got {self.scale}", source=where)
        if self.num_classes < 2 or self.num_features < 1:
            raise DatasetError(
                f"numClasses must be at least 2 and numFeatures at least 1, got "
                f"{self.num_classes} and {self.num_features}",
                source=where,
            )
        if not 0 <= self.label_noise < 1:
            raise DatasetError(
                f"labelNoise must lie in [0, 1), got {self.label_noise}", source=where
            )
        counts = self.node_counts()
        for et, m in self.edge_counts().items():
            pairs = counts[et[0]] * counts[et[2]] - (counts[et[0]] if et[0] == et[2] else 0)
            if m > pairs // 2:
                raise DatasetError(
                    f"scale={self.scale} leaves {et[0]} and {et[2]} too few nodes for "
                    f"{m} {et[1]} edges; raise scale",
                    source=where,
                )


@dataclass
class _Table:
    """Nodes of one type: their community, and a degree-weighted draw table grouped by it."""

    community: npt.NDArray[np.int32]
    stubs: npt.NDArray[Any]
    start: npt.NDArray[np.int64]
    size: npt.NDArray[np.int64]

    def draw(self, rng: np.random.Generator, size: int) -> npt.NDArray[Any]:
        return self.stubs[rng.integers(0, len(self.stubs), size)]

    def draw_in(self, rng: np.random.Generator, comm: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """One node per entry of ``comm`` from that community (any node where it has none)."""
        size = self.size[comm]
        pick: npt.NDArray[np.int64] = self.start[comm]
        pick = pick + (rng.random(len(comm)) * size).astype(np.int64)
        empty = size == 0
        if empty.any():
            pick[empty] = rng.integers(0, len(self.stubs), int(empty.sum()))
        drawn: npt.NDArray[Any] = self.stubs[pick]
        return drawn


def _table(
    n: int,
    num_classes: int,
    class_p: npt.NDArray[np.float64],
    sigma: float,
    rng: np.random.Generator,
) -> _Table:
    community = rng.choice(num_classes, size=n, p=class_p).astype(np.int32)
    w = rng.lognormal(0.0, sigma, size=n)
    copies = np.maximum(1, np.rint(w / w.mean() * STUBS_PER_NODE)).astype(np.int64)
    del w
    order = np.argsort(community, kind="stable")
    stubs = np.repeat(order.astype(index_dtype(n)), copies[order])
    size = np.bincount(community[stubs], minlength=num_classes).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
    return _Table(community, stubs, start, size)


def _relation(
    et: EdgeType,
    m: int,
    tables: dict[str, _Table],
    homophily: float,
    counts: dict[str, int],
    rng: np.random.Generator,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Exactly ``m`` distinct (src, dst) edges of ``et``, no self-loops: the source is drawn
    by degree, the destination from its community with probability ``homophily``."""
    src_t, dst_t = tables[et[0]], tables[et[2]]
    ns = np.int64(counts[et[0]])
    keys = np.empty(0, dtype=np.int64)
    have = 0
    for rounds in range(1, MAX_ROUNDS + 1):
        want = int((m - have) * (1.05 if rounds == 1 else 1.5)) + 1024
        grown = np.empty(have + want, dtype=np.int64)
        grown[:have] = keys[:have]
        keys = grown
        for a, b in chunks(want, EDGE_CHUNK):
            s = src_t.draw(rng, b - a)
            d = dst_t.draw(rng, b - a)
            intra = np.flatnonzero(rng.random(b - a) < homophily)
            d[intra] = dst_t.draw_in(rng, src_t.community[s[intra]])
            if et[0] == et[2]:  # one direction per pair: reciprocal edges would merge
                s, d = np.minimum(s, d), np.maximum(s, d)
            k = d.astype(np.int64) * ns
            k += s
            if et[0] == et[2]:
                k[s == d] = -1  # a self-loop: dropped below
            keys[have + a : have + b] = k
        have = sort_unique_keys(keys)
        if have and keys[0] < 0:  # the self-loop marker sorts first
            keys[: have - 1] = keys[1:have]
            have -= 1
        if have >= m:
            break
    else:
        raise DatasetError(f"could not draw {m} distinct {et[1]} edges; raise scale")
    if have > m:
        keep = np.ones(have, dtype=np.bool_)
        keep[rng.choice(have, size=have - m, replace=False)] = False
        keys = keys[:have][keep]
    dst, src = np.divmod(keys[:m], ns)
    del keys
    return src.astype(index_dtype(counts[et[0]])), dst.astype(index_dtype(counts[et[2]]))


def generate_mag(
    config: SyntheticHeteroConfig | None = None, *, progress: ProgressFn | None = None
) -> HeteroGraphData:
    """Generate the MAG-shaped graph of ``config`` (default: full scale, seed 0)."""
    cfg = config or SyntheticHeteroConfig()
    cfg.check()
    report = progress or (lambda _: None)
    counts = cfg.node_counts()
    c = cfg.num_classes
    streams = np.random.SeedSequence(cfg.seed).spawn(3 + len(counts) + len(MAG_EDGES))
    r_label, r_feature, r_split, *rest = (np.random.default_rng(s) for s in streams)
    r_types, r_edges = rest[: len(counts)], rest[len(counts) :]

    class_p = 1.0 / np.arange(1, c + 1, dtype=np.float64) ** CLASS_SKEW
    class_p /= class_p.sum()
    tables = {
        t: _table(n, c, class_p, DEGREE_SIGMA[t], rng)
        for (t, n), rng in zip(counts.items(), r_types, strict=True)
    }
    report(0.05)
    edges: dict[EdgeType, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}
    for i, ((et, m), rng) in enumerate(zip(cfg.edge_counts().items(), r_edges, strict=True)):
        edges[et] = _relation(et, m, tables, HOMOPHILY[et], counts, rng)
        report(0.05 + 0.5 * (i + 1) / len(MAG_EDGES))
    community = tables[TARGET].community
    del tables
    in_csr, info = typed_csr_from_edges(edges, counts, add_reverse=cfg.add_reverse)
    del edges
    report(0.75)
    y = _labels(community, c, cfg.label_noise, r_label)
    x = _features(community, cfg.num_features, c, r_feature)
    del community
    report(0.95)
    masks = _splits(counts[TARGET], r_split)
    report(1.0)
    graph = HeteroGraphData(
        node_counts=counts,
        in_csr=in_csr,
        x={TARGET: x},
        target_node_type=TARGET,
        y=y,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
        num_classes=c,
        name="synthetic-mag",
        info={
            **info,
            "generator": "MAG-shaped latent communities",
            "scale": cfg.scale,
            "seed": cfg.seed,
            "label_noise": cfg.label_noise,
        },
    )
    graph.validate()
    return graph


def _labels(
    community: npt.NDArray[np.int32], c: int, noise: float, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """The community, or with probability ``noise`` another one of the same group."""
    y = community.astype(np.int64)
    flip = np.flatnonzero(rng.random(len(y)) < noise)
    group_start = (y[flip] // GROUP_SIZE) * GROUP_SIZE
    group_size = np.minimum(GROUP_SIZE, c - group_start)
    shift = 1 + (rng.random(len(flip)) * (group_size - 1)).astype(np.int64)
    # A shift of 1..size-1 within the group: never the community itself (groups of 2+).
    moved = group_start + (y[flip] - group_start + shift) % group_size
    y[flip] = np.where(group_size > 1, moved, y[flip])
    return y


def _features(
    community: npt.NDArray[np.int32], f: int, c: int, rng: np.random.Generator
) -> npt.NDArray[np.float32]:
    """Community centroid (norm CENTROID_NORM) plus N(0, 1) per dimension, float32."""
    centroids = rng.standard_normal((c, f))
    centroids *= CENTROID_NORM / np.linalg.norm(centroids, axis=1, keepdims=True)
    centroids32 = centroids.astype(np.float32)
    n = len(community)
    x = np.empty((n, f), dtype=np.float32)
    rows = max(1, (16 << 20) // (4 * f))
    for a in range(0, n, rows):
        b = min(n, a + rows)
        block = rng.standard_normal((b - a, f), dtype=np.float32)
        block += centroids32[community[a:b]]
        x[a:b] = block
    return x


def _splits(
    n: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    perm = rng.permutation(n)
    n_train = max(1, round(SPLIT_SHARES[0] * n))
    n_val = min(n - n_train, round(SPLIT_SHARES[1] * n))
    masks = [np.zeros(n, dtype=np.bool_) for _ in range(3)]
    masks[0][perm[:n_train]] = True
    masks[1][perm[n_train : n_train + n_val]] = True
    masks[2][perm[n_train + n_val :]] = True
    return masks[0], masks[1], masks[2]
