"""Loading the dataset a job spec names: generated, OGB raw files or a PyG file on the volume;
homogeneous (:class:`GraphData`) or heterogeneous (:class:`HeteroGraphData`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

from distgnn_api.edge_types import edge_type_key
from distgnn_api.mag_shape import MAG_NODE_TYPES
from distgnn_api.spec import DatasetSpec
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData, HeteroGraphData
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig

ProgressFn = Callable[[float], None]
"""Called with the share of loading done, from 0 to 1."""


ONE_SOURCE = "set exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg"


def dataset_kind(spec: DatasetSpec) -> str:
    """synthetic, synthetic_mag, synthetic_link, ogb or pyg."""
    for kind in ("synthetic", "synthetic_mag", "synthetic_link", "ogb", "pyg"):
        if getattr(spec, kind) is not None:
            return kind
    raise DatasetError(ONE_SOURCE, source="spec.dataset")


def dataset_num_nodes(spec: DatasetSpec) -> int | None:
    """The node count (all types together) when the spec alone tells it (synthetic,
    syntheticMag), so checks can run early."""
    if spec.synthetic is not None:
        return spec.synthetic.num_nodes
    if spec.synthetic_link is not None:
        return spec.synthetic_link.num_nodes
    if spec.synthetic_mag is not None:
        return sum(spec.synthetic_mag.num_nodes(t.name) for t in MAG_NODE_TYPES)
    return None


def load_dataset(
    spec: DatasetSpec, data_dir: str | Path, *, progress: ProgressFn | None = None
) -> GraphData:
    """The graph of ``spec``; OGB and PyG paths are relative to the volume at ``data_dir``.
    A heterogeneous spec loads with :func:`load_hetero_spec` instead."""
    if spec.is_hetero:
        raise DatasetError(
            "the dataset is heterogeneous (syntheticMag, or hetero is set): load it with "
            "load_hetero_spec",
            source="spec.dataset",
        )
    if spec.synthetic is not None:
        from distgnn_workload.data.synthetic import generate

        return generate(spec.synthetic, progress=progress)
    if spec.synthetic_link is not None:
        raise DatasetError(
            "syntheticLink is a link-prediction graph: load it with "
            "distgnn_workload.data.link_dataset.load_link_dataset",
            source="spec.dataset.syntheticLink",
        )
    if spec.ogb is not None:
        from distgnn_workload.data.ogb import load_ogb

        return load_ogb(Path(data_dir) / spec.ogb.path, spec.ogb.split_scheme, progress=progress)
    if spec.pyg is not None:
        from distgnn_workload.data.pyg import load_pyg

        graph = load_pyg(Path(data_dir) / spec.pyg.path)
        if progress:
            progress(1.0)
        return graph
    raise DatasetError(ONE_SOURCE, source="spec.dataset")


# --------------------------------------------------------------------------- heterogeneous

HETERO_SOURCES = ("synthetic_mag", "ogb", "pyg")
"""Where a heterogeneous graph comes from: generated, OGB raw files or a PyG HeteroData file."""


def load_hetero_dataset(
    source: str,
    data_dir: str | Path = ".",
    *,
    path: str | Path | None = None,
    split_scheme: str | None = None,
    target_node_type: str | None = None,
    add_reverse: bool = True,
    synthetic: SyntheticHeteroConfig | None = None,
    progress: ProgressFn | None = None,
) -> HeteroGraphData:
    """The heterogeneous graph of one source kind (one of :data:`HETERO_SOURCES`).

    ``synthetic_mag`` generates ``synthetic`` (default: full-scale ogbn-mag shape); ``ogb``
    and ``pyg`` read ``path``, relative to the volume at ``data_dir``. ``target_node_type``
    None takes the only node type with labels; ``add_reverse`` adds reverse relations as
    PyG's ``ToUndirected`` does.
    """
    if source == "synthetic_mag":
        from dataclasses import replace

        from distgnn_workload.data.synthetic_hetero import generate_mag

        cfg = replace(synthetic or SyntheticHeteroConfig(), add_reverse=add_reverse)
        graph = generate_mag(cfg, progress=progress)
        if target_node_type not in (None, graph.target_node_type):
            raise DatasetError(
                f"targetNodeType {target_node_type!r}: the MAG-shaped graph has labels on "
                f"{graph.target_node_type} only",
                source="spec.dataset.hetero",
            )
        return graph
    if source not in HETERO_SOURCES:
        raise DatasetError(
            f"unknown heterogeneous source {source!r}; use one of {', '.join(HETERO_SOURCES)}",
            source="spec.dataset",
        )
    if path is None:
        raise DatasetError(
            f"a {source} dataset needs the path of its files on the volume",
            source=f"spec.dataset.{source}.path",
        )
    full = Path(data_dir) / path
    if source == "ogb":
        from distgnn_workload.data.ogb_hetero import load_ogb_hetero

        return load_ogb_hetero(
            full,
            split_scheme,
            target_node_type=target_node_type,
            add_reverse=add_reverse,
            progress=progress,
        )
    from distgnn_workload.data.pyg_hetero import load_pyg_hetero

    graph = load_pyg_hetero(full, target_node_type=target_node_type, add_reverse=add_reverse)
    if progress:
        progress(1.0)
    return graph


def load_hetero_spec(
    spec: DatasetSpec, data_dir: str | Path, *, progress: ProgressFn | None = None
) -> HeteroGraphData:
    """The heterogeneous graph of ``spec`` (syntheticMag, or ogb/pyg with hetero), its
    declared node and edge types checked against what was loaded."""
    hetero = spec.hetero_section
    if hetero is None:
        raise DatasetError(
            "the dataset is homogeneous: set syntheticMag, or hetero beside ogb or pyg",
            source="spec.dataset",
        )
    load = functools.partial(
        load_hetero_dataset,
        data_dir=data_dir,
        target_node_type=hetero.target_node_type,
        add_reverse=hetero.add_reverse_edges,
        progress=progress,
    )
    if spec.synthetic_mag is not None:
        mag = spec.synthetic_mag
        synthetic = SyntheticHeteroConfig(
            scale=mag.scale,
            seed=mag.seed,
            num_classes=mag.num_classes,
            num_features=mag.num_features,
        )
        graph = load("synthetic_mag", synthetic=synthetic)
    elif spec.ogb is not None:
        graph = load("ogb", path=spec.ogb.path, split_scheme=spec.ogb.split_scheme)
    elif spec.pyg is not None:
        graph = load("pyg", path=spec.pyg.path)
    else:
        raise DatasetError(
            "hetero needs its files: set ogb or pyg beside it, or use syntheticMag",
            source="spec.dataset.hetero",
        )
    check_declared_types(graph, hetero.node_types, hetero.edge_types)
    return graph


def check_declared_types(
    graph: HeteroGraphData,
    node_types: Sequence[str] | None = None,
    edge_types: Sequence[str] | None = None,
    *,
    field: str = "spec.dataset.hetero",
) -> None:
    """Check the node types and relations (``src__rel__dst``, without the reverses the loader
    added) a spec declares against those of the loaded graph; unset means anything goes."""
    if node_types is not None:
        _same(f"{field}.nodeTypes", "node types", list(node_types), graph.node_types)
    if edge_types is not None:
        added = set(graph.info.get("reverse_edge_types_added", []))
        stored = [edge_type_key(et) for et in graph.edge_types]
        _same(
            f"{field}.edgeTypes",
            "relations",
            list(edge_types),
            [k for k in stored if k not in added],
        )


def _same(field: str, what: str, declared: list[str], actual: list[str]) -> None:
    missing = sorted(set(declared) - set(actual))
    extra = sorted(set(actual) - set(declared))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"declares {', '.join(missing)}, which the dataset lacks")
        if extra:
            parts.append(f"omits {', '.join(extra)}, which the dataset has")
        raise DatasetError(
            f"{'; '.join(parts)}: list the dataset's {what} ({', '.join(actual)}) or leave the "
            "field unset",
            source=field,
        )
