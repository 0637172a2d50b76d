"""The synthetic graph family of :mod:`.synthetic`, generated chunk by chunk for the
out-of-core partitioner (a :class:`.stream.StreamedGraph`).

Labels, features and splits are :func:`.synthetic.generate`'s to the bit (the same seeded
streams, the same blocks). The edges are drawn from the same degree-corrected block model,
``EDGE_CHUNK`` pairs at a time, without the in-memory generator's global sort: exactly
``numEdges`` pairs are drawn, and the duplicates and self-loops among them are dropped by
the partitioner (a small share on sparse graphs, recorded in META.json's ``graph_info``), so
the graph has about, not exactly, ``numEdges`` edges, and is not the in-memory graph of the
same seed. Memory: the labels and the stub table (about 45 bytes per node); one chunk of
edges or feature rows at a time.
"""

from __future__ import annotations

import numpy as np

from distgnn_api.spec import SyntheticDataset
from distgnn_workload.data.csr import EDGE_CHUNK, chunks
from distgnn_workload.data.stream import EdgeChunks, FeatureChunks, StreamedGraph
from distgnn_workload.data.synthetic import (
    _endpoints,
    _splits,
    check_edge_count,
    communities,
    feature_blocks,
)


def _streams(seed: int) -> list[np.random.Generator]:
    """generate()'s five streams: label, degree, edge, feature, split."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)]


def stream_synthetic(spec: SyntheticDataset, *, chunk: int = EDGE_CHUNK) -> StreamedGraph:
    """The graph of ``spec``, with edges and features generated on each pass."""
    n, m, f, c = spec.num_nodes, spec.num_edges, spec.num_features, spec.num_classes
    check_edge_count(n, m)
    r_label, r_degree, _, _, r_split = _streams(spec.seed)
    table = communities(n, c, r_label, r_degree)
    y = table.y
    train_mask, val_mask, test_mask = _splits(n, spec.train_fraction, spec.val_fraction, r_split)

    def edges() -> EdgeChunks:
        rng = _streams(spec.seed)[2]
        for a, b in chunks(m, chunk):
            u, v = _endpoints(b - a, spec.homophily, table, rng)
            yield u.astype(np.int64), v.astype(np.int64)

    def features() -> FeatureChunks:
        yield from feature_blocks(y, f, c, spec.feature_noise, _streams(spec.seed)[3])

    return StreamedGraph(
        name="synthetic",
        num_features=f,
        num_classes=c,
        y=y,
        train_mask=train_mask,
        val_mask=val_mask,
        test_mask=test_mask,
        edges=edges,
        features=features,
        edge_pairs_hint=m,
        info={
            "generator": "degree-corrected SBM, streamed",
            "homophily": spec.homophily,
            "edge_pairs_drawn": m,
        },
    )
