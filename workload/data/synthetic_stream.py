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
from distgnn_workload.data.labels import mask_fields
from distgnn_workload.data.stream import EdgeChunks, FeatureChunks, StreamedGraph
from distgnn_workload.data.synthetic import _endpoints, feature_blocks, nodes, streams


def stream_synthetic(spec: SyntheticDataset, *, chunk: int = EDGE_CHUNK) -> StreamedGraph:
    """The graph of ``spec``, with edges and features generated on each pass."""
    m = spec.num_edges
    table, masks = nodes(spec)

    def edges() -> EdgeChunks:
        rng = streams(spec.seed)[2]
        for a, b in chunks(m, chunk):
            u, v = _endpoints(b - a, spec.homophily, table, rng)
            yield u.astype(np.int64), v.astype(np.int64)

    def features() -> FeatureChunks:
        yield from feature_blocks(
            table.y, spec.num_features, spec.num_classes, spec.feature_noise, streams(spec.seed)[3]
        )

    return StreamedGraph(
        name="synthetic",
        num_features=spec.num_features,
        num_classes=spec.num_classes,
        y=table.y,
        **mask_fields(masks),
        edges=edges,
        features=features,
        edge_pairs_hint=m,
        info={
            "generator": "degree-corrected SBM, streamed",
            "homophily": spec.homophily,
            "edge_pairs_drawn": m,
        },
    )
