"""Loading the dataset of a link-prediction job as a :class:`LinkData`: the citation2-shaped
generator, OGB link raw files, or any homogeneous dataset's edges (synthetic, OGB node
files, a PyG file), whose labels and node splits a link job does not use."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distgnn_api.spec import DatasetSpec
from distgnn_workload.data.csr import edge_pairs
from distgnn_workload.data.dataset import ProgressFn, load_dataset
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.link_data import LinkData


def load_link_dataset(
    spec: DatasetSpec,
    data_dir: str | Path,
    *,
    read_split: bool,
    progress: ProgressFn | None = None,
) -> LinkData:
    """The graph of ``spec`` for link prediction; ``read_split`` reads an OGB link
    dataset's own split (``linkPrediction.split.fromDataset``)."""
    if spec.is_hetero:
        raise DatasetError(
            "link prediction on a heterogeneous dataset is not supported by the partition "
            "step yet; use a homogeneous dataset (syntheticLink, synthetic, ogb or pyg)",
            source="spec.dataset",
        )
    if spec.synthetic_link is not None:
        from distgnn_workload.data.synthetic_link import generate_link

        return generate_link(spec.synthetic_link, progress=progress)
    if spec.ogb is not None and _is_link_layout(Path(data_dir) / spec.ogb.path):
        from distgnn_workload.data.ogb_link import load_ogb_link

        return load_ogb_link(
            Path(data_dir) / spec.ogb.path,
            spec.ogb.split_scheme,
            read_split=read_split,
            progress=progress,
        )
    if read_split:
        raise DatasetError(
            "has no link split of its own (an OGB link dataset's split/<scheme>/train.pt, "
            "valid.pt and test.pt); set linkPrediction.split.valid and split.test fractions",
            source="spec.linkPrediction.split.fromDataset",
        )
    return from_graph(load_dataset(spec, data_dir, progress=progress))


def _is_link_layout(root: Path) -> bool:
    """True for a folder laid out as an OGB link dataset: raw/ without node labels."""
    raw = root / "raw"
    return raw.is_dir() and not any(
        (raw / name).is_file() for name in ("node-label.csv.gz", "node-label.csv")
    )


def from_graph(graph: GraphData) -> LinkData:
    """A node dataset's undirected edges (each once, lower id first) and features."""
    pairs = edge_pairs(graph.indptr, graph.indices)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    return LinkData(
        x=graph.x,
        src=np.ascontiguousarray(pairs[:, 0]),
        dst=np.ascontiguousarray(pairs[:, 1]),
        name=graph.name,
        info=dict(graph.info),
    )
