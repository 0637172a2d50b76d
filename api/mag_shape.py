"""The shape of ogbn-mag: node types, relations, counts and split, and how they scale.

One source for the spec (admission knows syntheticMag's types statically) and for the
workload's MAG-shaped generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from distgnn_api.edge_types import EdgeType, reverse_edge_type


@dataclass(frozen=True)
class NodeTypeShape:
    """One node type of the MAG shape at full scale."""

    name: str
    num_nodes: int
    num_features: int
    """0: the type has no features (it gets learnt embeddings of ``model.embeddingDim``)."""


MAG_TARGET_NODE_TYPE: Final = "paper"
MAG_NUM_CLASSES: Final = 349
MAG_NODE_TYPES: Final = (
    NodeTypeShape("paper", 736_389, 128),
    NodeTypeShape("author", 1_134_649, 0),
    NodeTypeShape("institution", 8_740, 0),
    NodeTypeShape("field_of_study", 59_965, 0),
)
"""ogbn-mag's node types, in PyG's ``OGB_MAG`` order; only paper has features and labels."""
MAG_RELATIONS: Final[tuple[tuple[EdgeType, int], ...]] = (
    (("author", "affiliated_with", "institution"), 1_043_998),
    (("author", "writes", "paper"), 7_145_660),
    (("paper", "cites", "paper"), 5_416_271),
    (("paper", "has_topic", "field_of_study"), 7_505_078),
)
"""ogbn-mag's relations and their edge counts, in PyG's ``OGB_MAG`` order."""
MAG_SPLIT: Final = {"train": 629_571, "valid": 64_879, "test": 41_939}
"""ogbn-mag's time split of the papers (train up to 2017, valid 2018, test 2019)."""
MAG_PAPERS: Final = MAG_NODE_TYPES[0].num_nodes
MIN_MAG_SCALE: Final = 0.001
"""Below this the relations would not fit as simple graphs (institution has 9 nodes here)."""


def scaled_count(full: int, scale: float) -> int:
    """A full-scale count at ``scale``: rounded, and at least 1. The generator's one rule."""
    return max(1, round(full * scale))


def mag_edge_types(add_reverse_edges: bool) -> tuple[EdgeType, ...]:
    """The MAG shape's edge types: its relations, then (as ``ToUndirected`` appends them) the
    ``rev_`` reverse of each relation between two types; paper__cites__paper is made
    undirected in place."""
    relations = tuple(et for et, _ in MAG_RELATIONS)
    if not add_reverse_edges:
        return relations
    return relations + tuple(reverse_edge_type(et) for et in relations if et[0] != et[2])


def mag_relation_counts(scale: float, add_reverse_edges: bool) -> tuple[tuple[EdgeType, int], ...]:
    """Stored edges of each of :func:`mag_edge_types` at ``scale``, as the generator stores
    them (each relation's edges distinct, no self-loops): a relation within one type made
    undirected holds each edge twice, a ``rev_`` reverse as many as its relation."""
    counts = {et: scaled_count(full, scale) for et, full in MAG_RELATIONS}
    out = []
    for et in mag_edge_types(add_reverse_edges):
        if et in counts:
            both = add_reverse_edges and et[0] == et[2]
            out.append((et, 2 * counts[et] if both else counts[et]))
        else:
            out.append((et, counts[reverse_edge_type(et)]))
    return tuple(out)
