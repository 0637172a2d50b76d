"""Checks of a heterogeneous job against the graph it loads, for the workload.

Admission cannot see the types of ``ogb`` and ``pyg`` files; the workload calls these when it
loads them. Each error names the spec field to fix, as admission's errors do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from distgnn_api.edge_types import EdgeType, edge_type_key, edge_type_keys
from distgnn_api.hetero import HeteroDataset


class HeteroMismatch(ValueError):
    """The loaded graph disagrees with the spec; ``field`` is the spec field to fix."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def _listed(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "(none)"


def check_declared_types(
    hetero: HeteroDataset, node_types: Iterable[str], edge_types: Iterable[EdgeType]
) -> None:
    """Declared nodeTypes/edgeTypes must be exactly the files' types (relations before reverses)."""
    if hetero.node_types is not None:
        found = set(node_types)
        if set(hetero.node_types) != found:
            raise HeteroMismatch(
                "spec.dataset.hetero.nodeTypes",
                f"declares {_listed(hetero.node_types)} but the dataset has {_listed(found)}",
            )
    if hetero.edge_types is not None:
        found_keys = set(edge_type_keys(edge_types))
        if set(hetero.edge_types) != found_keys:
            raise HeteroMismatch(
                "spec.dataset.hetero.edgeTypes",
                f"declares {_listed(hetero.edge_types)} but the dataset has {_listed(found_keys)}",
            )


def resolve_target_node_type(hetero: HeteroDataset, labelled: Iterable[str]) -> str:
    """The target node type: the one set, which must have labels, or the only labelled type."""
    have = sorted(set(labelled))
    field = "spec.dataset.hetero.targetNodeType"
    if hetero.target_node_type is not None:
        if hetero.target_node_type not in have:
            raise HeteroMismatch(
                field,
                f"{hetero.target_node_type!r} has no labels in the dataset; the node types "
                f"with labels are {_listed(have)}",
            )
        return hetero.target_node_type
    if len(have) != 1:
        raise HeteroMismatch(
            field,
            f"is unset and the dataset has labels on {_listed(have)}: set it to the type "
            "to train on",
        )
    return have[0]


def resolve_edge_fanouts(
    fanout: Sequence[int],
    edge_fanouts: Mapping[str, Sequence[int]] | None,
    edge_types: Iterable[EdgeType],
) -> dict[EdgeType, list[int]]:
    """Per edge type of the loaded graph (reverses included): its edgeFanouts entry, else the
    one ``fanout`` list. A key that names no edge type of the graph is an error."""
    types = list(edge_types)
    known = set(edge_type_keys(types))
    chosen = dict(edge_fanouts or {})
    unknown = sorted(set(chosen) - known)
    if unknown:
        raise HeteroMismatch(
            "spec.model.edgeFanouts",
            f"{unknown[0]} is not an edge type of the dataset; its edge types are {_listed(known)}",
        )
    return {et: list(chosen.get(edge_type_key(et), fanout)) for et in types}
