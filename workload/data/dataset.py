"""Loading the dataset a job spec names: generated, OGB raw files or a PyG file on the volume."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from distgnn_api.spec import DatasetSpec
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData

ProgressFn = Callable[[float], None]
"""Called with the share of loading done, from 0 to 1."""


def dataset_kind(spec: DatasetSpec) -> str:
    """synthetic, ogb or pyg."""
    for kind in ("synthetic", "ogb", "pyg"):
        if getattr(spec, kind) is not None:
            return kind
    raise DatasetError("set exactly one of synthetic, ogb or pyg", source="spec.dataset")


def dataset_num_nodes(spec: DatasetSpec) -> int | None:
    """The node count when the spec alone tells it (synthetic), so checks can run early."""
    return spec.synthetic.num_nodes if spec.synthetic is not None else None


def load_dataset(
    spec: DatasetSpec, data_dir: str | Path, *, progress: ProgressFn | None = None
) -> GraphData:
    """The graph of ``spec``; OGB and PyG paths are relative to the volume at ``data_dir``."""
    if spec.synthetic is not None:
        from distgnn_workload.data.synthetic import generate

        return generate(spec.synthetic, progress=progress)
    if spec.ogb is not None:
        from distgnn_workload.data.ogb import load_ogb

        return load_ogb(Path(data_dir) / spec.ogb.path, spec.ogb.split_scheme, progress=progress)
    if spec.pyg is not None:
        from distgnn_workload.data.pyg import load_pyg

        graph = load_pyg(Path(data_dir) / spec.pyg.path)
        if progress:
            progress(1.0)
        return graph
    raise DatasetError("set exactly one of synthetic, ogb or pyg", source="spec.dataset")
