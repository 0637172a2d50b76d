"""An OGB raw dataset (layout in :mod:`.ogb`) as a :class:`.stream.StreamedGraph`: the
edges and the feature rows are read from their CSVs in chunks, each pass anew; labels and
splits are read whole (a few bytes per node). The checks and their messages are
:func:`.ogb.load_ogb`'s, raised when the chunk that breaks them is read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distgnn_workload.data.csv_files import _open, iter_csv
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.labels import class_count, mask_fields
from distgnn_workload.data.ogb import _labels, _split_masks, node_property_files
from distgnn_workload.data.ogb_files import raw_tables
from distgnn_workload.data.stream import EdgeChunks, FeatureChunks, StreamedGraph

CHUNK_ROWS = 1 << 20
"""CSV lines parsed per chunk."""


def count_lines(path: Path) -> int:
    """Non-empty lines of a CSV file (gzip or plain)."""
    with _open(path) as f:
        return sum(1 for line in f if line.strip())


def stream_ogb(
    root: str | Path,
    split_scheme: str | None = None,
    *,
    num_classes: int | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> StreamedGraph:
    """Open an OGB raw dataset directory for streaming; ``num_classes`` None infers it."""
    root = Path(root)
    tables = raw_tables(root)
    label_file, split_dir, split_paths = node_property_files(root, tables.folder, split_scheme)
    edge_file, feat_file = tables.edges, tables.features
    declared_nodes, declared_edges = tables.declared_nodes, tables.declared_edges

    if declared_nodes is None:
        n = sum(len(c) for c in iter_csv(label_file, np.int64, 1, chunk_rows))
    else:
        n = declared_nodes
    y = _labels(label_file, n, num_classes)
    masks = _split_masks(split_paths, n)
    first = next(iter_csv(feat_file, np.float32, None, 1), None)
    num_features = int(first.shape[1]) if first is not None else 0

    def edges() -> EdgeChunks:
        seen = 0
        for chunk in iter_csv(edge_file, np.int64, 2, chunk_rows):
            bad = (chunk < 0) | (chunk >= n)
            if bad.any():
                row = int(np.flatnonzero(bad.any(axis=1))[0])
                raise DatasetError(
                    f"edge ({chunk[row, 0]}, {chunk[row, 1]}) refers to a node outside "
                    f"[0, {n}): the graph has {n} nodes",
                    source=edge_file,
                    line=seen + row + 1,
                )
            seen += len(chunk)
            yield chunk[:, 0].copy(), chunk[:, 1].copy()
        if declared_edges is not None and seen != declared_edges:
            raise DatasetError(
                f"has {seen} edges but num-edge-list says {declared_edges}", source=edge_file
            )

    def features() -> FeatureChunks:
        seen = 0
        for chunk in iter_csv(feat_file, np.float32, num_features, chunk_rows):
            finite = np.isfinite(chunk).all(axis=1)
            if not finite.all():
                row = int(np.flatnonzero(~finite)[0])
                raise DatasetError(
                    "holds a NaN or infinite feature", source=feat_file, line=seen + row + 1
                )
            seen += len(chunk)
            if seen > n:
                raise DatasetError(
                    f"has more than {n} rows but the graph has {n} nodes (num-node-list); "
                    "each node needs one feature row",
                    source=feat_file,
                )
            yield chunk
        if seen != n:
            raise DatasetError(
                f"has {seen} rows but the graph has {n} nodes (num-node-list); "
                "each node needs one feature row",
                source=feat_file,
            )

    graph = StreamedGraph(
        name=root.name,
        num_features=num_features,
        num_classes=class_count(y, num_classes),
        y=y,
        **mask_fields(masks),
        edges=edges,
        features=features,
        edge_pairs_hint=declared_edges if declared_edges is not None else count_lines(edge_file),
        info={"split_scheme": split_dir.name},
    )
    graph.validate()
    return graph
