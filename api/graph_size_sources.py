"""Where a job's graph size comes from: the spec, a partition store's META.json or counts.

A synthetic dataset states its size in the spec. An ``ogb`` or ``pyg`` dataset does not: its
size comes from counts given on the command line, from a partition store's ``META.json`` (a
typed store's records its per-type counts), or, for the public OGB datasets, from their
published counts when the dataset directory is named after one (``datasets/ogbn_products``).
:func:`resolve` takes META.json's counts or the spec's, with any count given overriding them,
as a :class:`~distgnn_api.graph_size.GraphSize`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from distgnn_api.edge_types import parse_edge_type_key
from distgnn_api.graph_size import GraphSize, NodeTypeSize, RelationSize, SamplingProbe
from distgnn_api.hetero import DEFAULT_EMBEDDING_DIM
from distgnn_api.mag_shape import (
    MAG_NODE_TYPES,
    MAG_NUM_CLASSES,
    MAG_RELATIONS,
    MAG_SPLIT,
    MAG_TARGET_NODE_TYPE,
    mag_relation_counts,
    scaled_count,
)
from distgnn_api.spec import DistGNNJobSpec

TYPED_APPROXIMATE = (
    "a heterogeneous graph: its feature tables (per featured type), learnable embeddings "
    "(per featureless type), the trainer's parameters, activations, embedding lookups, "
    "prefetched mini-batches and fixed-shape step inputs, and the typed samplers' buffers "
    "are sized per node type and relation, from expected mini-batches (each relation draws "
    "min(fanout, its mean degree) neighbours per node) and caps fitted to them as the "
    "trainer fits its caps to sampled ones; each type's nodes spread over the partitions as "
    "evenly as all nodes are; its topology, labels, the feature exchange, the samplers' "
    "batch slots, full-neighbourhood evaluation and the bytes per mini-batch are still sized "
    "as its homogeneous view (every type in one id space, rows of {width} values)"
)
HOMOGENEOUS_APPROXIMATE = "a heterogeneous graph, planned as its homogeneous view"


class GraphSizeError(ValueError):
    """The plan cannot tell the graph's size: the message says which counts to give."""


@dataclass(frozen=True)
class _Published:
    nodes: int
    undirected_edges: int
    features: int
    classes: int
    train: int


# Published counts of the public OGB node-property datasets (ogb.stanford.edu, dataset pages):
# nodes, edges as OGB lists them (undirected), feature dimension, classes, training nodes.
PUBLISHED_OGB: dict[str, _Published] = {
    "ogbn-arxiv": _Published(169_343, 1_166_243, 128, 40, 90_941),
    "ogbn-products": _Published(2_449_029, 61_859_140, 100, 47, 196_615),
    "ogbn-papers100m": _Published(111_059_956, 1_615_685_872, 128, 172, 1_207_179),
}


# The OGB link-property datasets: nodes, edges (directed as OGB lists them; message passing
# holds both directions), feature dimension, training edges.
PUBLISHED_OGB_LINK: dict[str, tuple[int, int, int, int]] = {
    "ogbl-citation2": (2_927_963, 30_561_187, 128, 30_387_995),
    "ogbl-collab": (235_868, 1_285_465, 128, 1_179_052),
}


def _link_size(spec: DistGNNJobSpec) -> GraphSize | None:
    """A link-prediction graph the spec sizes: syntheticLink, or a published OGB link dataset.

    An epoch's seeds are its training edges (each brings both ends and its negatives).
    """
    ds, link = spec.dataset, spec.link_prediction
    if ds.synthetic_link is not None:
        g = ds.synthetic_link
        held = 0.0 if link is None else link.split.valid_fraction + link.split.test_fraction
        return GraphSize(
            num_nodes=g.num_nodes,
            num_edges=2 * g.num_edges,
            num_features=g.num_features,
            num_classes=0,
            num_train_nodes=max(1, round((1 - held) * g.num_edges)),
            source=f"syntheticLink at scale {g.scale:g} (ogbl-citation2's counts x scale)",
        )
    if ds.ogb is not None:
        name = ds.ogb.path.rstrip("/").rsplit("/", 1)[-1].lower().replace("_", "-")
        for key, (nodes, edges, features, train) in PUBLISHED_OGB_LINK.items():
            if name == key or name == key.removeprefix("ogbl-"):
                return GraphSize(
                    num_nodes=nodes,
                    num_edges=2 * edges,
                    num_features=features,
                    num_classes=0,
                    num_train_nodes=train,
                    source=f"{key}'s published counts (dataset.ogb.path {ds.ogb.path})",
                )
    return None


def _published(path: str) -> tuple[str, _Published] | None:
    name = PurePosixPath(path).name.lower().replace("_", "-")
    for key, counts in PUBLISHED_OGB.items():
        if name == key or name.startswith(key + "-") or name == key.removeprefix("ogbn-"):
            return key, counts
    return None


def _is_mag(path: str) -> bool:
    name = PurePosixPath(path).name.lower().replace("_", "-")
    return name in ("ogbn-mag", "mag")


def _mag_size(
    spec: DistGNNJobSpec, scale: float, features: int, classes: int, source: str
) -> GraphSize:
    types = tuple(
        NodeTypeSize(t.name, scaled_count(t.num_nodes, scale), features if t.num_features else 0)
        for t in MAG_NODE_TYPES
    )
    edges = sum(scaled_count(count, scale) for _, count in MAG_RELATIONS)
    hetero = spec.dataset.hetero
    add_reverse = hetero is None or hetero.add_reverse_edges
    relations = tuple(
        RelationSize(*et, count) for et, count in mag_relation_counts(scale, add_reverse)
    )
    # the homogeneous view's one row width: paper's features, the others' embeddings
    width = max(features, spec.model.embedding_size)
    return GraphSize(
        num_nodes=sum(t.num_nodes for t in types),
        num_edges=2 * edges,
        num_features=width,
        num_classes=classes,
        num_train_nodes=scaled_count(MAG_SPLIT["train"], scale),
        source=source,
        approximate=TYPED_APPROXIMATE.format(width=width),
        node_types=types,
        relations=relations,
        target_node_type=MAG_TARGET_NODE_TYPE,
    )


def from_spec(spec: DistGNNJobSpec) -> GraphSize | None:
    """The size the spec states (synthetic datasets, published OGB datasets), else None."""
    ds = spec.dataset
    if spec.is_link_prediction and ds.hetero is None:
        sized = _link_size(spec)
        if sized is not None:
            return sized
    if ds.synthetic is not None:
        s = ds.synthetic
        return GraphSize(
            num_nodes=s.num_nodes,
            num_edges=2 * s.num_edges,
            num_features=s.num_features,
            num_classes=s.num_classes,
            num_train_nodes=max(1, round(s.train_fraction * s.num_nodes)),
            source="the spec (dataset.synthetic)",
        )
    if ds.synthetic_mag is not None:
        m = ds.synthetic_mag
        where = f"syntheticMag at scale {m.scale:g} (ogbn-mag's counts x scale)"
        return _mag_size(spec, m.scale, m.num_features, m.num_classes, where)
    if ds.ogb is not None and ds.hetero is not None and _is_mag(ds.ogb.path):
        where = f"ogbn-mag's published counts (dataset.ogb.path {ds.ogb.path})"
        return _mag_size(spec, 1.0, MAG_NODE_TYPES[0].num_features, MAG_NUM_CLASSES, where)
    if ds.ogb is not None and ds.hetero is None:
        found = _published(ds.ogb.path)
        if found is not None:
            name, c = found
            return GraphSize(
                num_nodes=c.nodes,
                num_edges=2 * c.undirected_edges,
                num_features=c.features,
                num_classes=c.classes,
                num_train_nodes=c.train,
                source=f"{name}'s published counts (dataset.ogb.path {ds.ogb.path})",
            )
    return None


TYPED_STORE = ("graph_kind", "hetero")
"""META.json's key and value of a typed store (workload/partition/meta.py GRAPH_KIND_KEY)."""


def _typed_meta(meta: dict[str, Any], p: Path, embedding_dim: int) -> GraphSize:
    """A typed store's META.json (workload/partition/meta.py HeteroPartitionMeta): its
    per-type counts and widths; the homogeneous view's rows as wide as the widest of its
    features and (with a featureless type) its embeddings."""
    types = tuple(
        NodeTypeSize(t, int(meta["node_counts"][t]), int(meta["num_features"][t]))
        for t in meta["node_types"]
    )
    widths = [t.num_features for t in types]
    if any(w == 0 for w in widths):
        widths.append(embedding_dim)
    counts: dict[str, Any] = meta["edge_counts"]
    relations = tuple(
        RelationSize(*parse_edge_type_key(key), int(counts[key]))
        for key in meta.get("edge_types", counts)
    )
    return GraphSize(
        num_nodes=sum(t.num_nodes for t in types),
        num_edges=sum(int(n) for n in meta["edge_counts"].values()),
        num_features=max(widths),
        num_classes=int(meta["num_classes"]),
        num_train_nodes=int(meta["num_train_nodes"]),
        source=f"{p}",
        edge_cut_fraction=float(meta["edge_cut_fraction"]),
        approximate=TYPED_APPROXIMATE.format(width=max(widths)),
        probe=_probe(meta.get("sampling_probe")),
        node_types=types,
        relations=relations,
        target_node_type=str(meta.get("target_node_type", "")),
    )


def from_meta(path: str | Path, embedding_dim: int = DEFAULT_EMBEDDING_DIM) -> GraphSize:
    """The size a partition store's META.json records (the file, or the store directory);
    ``embedding_dim``: the job's (``model.embeddingDim``), for a typed store."""
    p = Path(path)
    if p.is_dir():
        p = p / "META.json"
    try:
        meta: dict[str, Any] = json.loads(p.read_text())
        if meta.get(TYPED_STORE[0]) == TYPED_STORE[1]:
            return _typed_meta(meta, p, embedding_dim)
        return GraphSize(
            num_nodes=int(meta["num_nodes"]),
            num_edges=int(meta["num_edges"]),
            num_features=int(meta["num_features"]),
            num_classes=int(meta["num_classes"]),
            num_train_nodes=int(meta["num_train_nodes"]),
            source=f"{p}",
            edge_cut_fraction=float(meta["edge_cut_fraction"]),
            probe=_probe(meta.get("sampling_probe")),
        )
    except FileNotFoundError:
        raise GraphSizeError(f"{p}: no such file; give a partition store's META.json") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise GraphSizeError(f"{p}: not a partition store's META.json ({err!r})") from None


def _probe(data: Any) -> SamplingProbe | None:
    if not isinstance(data, dict):
        return None
    return SamplingProbe(
        holders=int(data["holders"]),
        batch_size=int(data["batch_size"]),
        fanout=tuple(int(f) for f in data["fanout"]),
        cache_ratio=float(data["cache_ratio"]),
        distinct_nodes=float(data["distinct_nodes"]),
        remote_nodes=float(data["remote_nodes"]),
        cache_hit_rate=float(data["cache_hit_rate"]),
    )


def resolve(
    spec: DistGNNJobSpec,
    *,
    meta: str | Path | None = None,
    nodes: int | None = None,
    edges: int | None = None,
    features: int | None = None,
    classes: int | None = None,
    train_nodes: int | None = None,
    edge_cut: float | None = None,
) -> GraphSize:
    """The graph's size: META.json or the spec, with any count given overriding it.

    ``edges`` counts undirected edges, as ``dataset.synthetic.numEdges`` and OGB do.
    """
    if meta is not None:
        base: GraphSize | None = from_meta(meta, spec.model.embedding_size)
    else:
        base = from_spec(spec)
    if base is None:
        if nodes is None or edges is None or features is None:
            raise GraphSizeError(
                "the spec does not state the graph's size (dataset.ogb or dataset.pyg): give "
                "--nodes, --edges (undirected) and --features, or --meta with a partition "
                "store's META.json"
            )
        base = GraphSize(
            num_nodes=nodes,
            num_edges=2 * edges,
            num_features=features,
            num_classes=classes or 2,
            num_train_nodes=train_nodes or nodes,
            source="counts given on the command line",
        )
    overrides: dict[str, Any] = {}
    for name, value, scale in (
        ("num_nodes", nodes, 1),
        ("num_edges", edges, 2),
        ("num_features", features, 1),
        ("num_classes", classes, 1),
        ("num_train_nodes", train_nodes, 1),
    ):
        if value is not None:
            if value < 1:
                raise GraphSizeError(
                    f"--{name.removeprefix('num_').replace('_', '-')} must be >= 1"
                )
            overrides[name] = value * scale
    if "num_edges" in overrides and base.relations:
        # each relation keeps its share of the edges given
        factor = overrides["num_edges"] / max(1, base.num_edges)
        overrides["relations"] = tuple(
            replace(r, num_edges=max(1, round(r.num_edges * factor))) for r in base.relations
        )
    if edge_cut is not None:
        if not 0.0 <= edge_cut <= 1.0:
            raise GraphSizeError("--edge-cut must be a share between 0 and 1")
        overrides["edge_cut_fraction"] = edge_cut
    if overrides:
        given = ", ".join(k.removeprefix("num_") for k in overrides)
        overrides["source"] = f"{base.source}, with {given} given"
        if base.node_types and ("num_nodes" in overrides or "num_features" in overrides):
            # the per-type counts no longer add up to the graph's
            overrides["node_types"] = ()
            overrides["relations"] = ()
            overrides["approximate"] = (
                f"{HOMOGENEOUS_APPROXIMATE} (--nodes or --features replace its per-type "
                "counts; its learnable embeddings are not modelled)"
            )
        base = replace(base, **overrides)
    return base
