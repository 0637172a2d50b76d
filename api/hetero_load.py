"""Checks of a heterogeneous job against the graph it loads, for the workload.

Admission cannot see the types of ``ogb`` and ``pyg`` files; the workload calls these when it
loads them. Each error names the spec field to fix, as admission's errors do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from distgnn_api.edge_types import EdgeType, edge_type_key, edge_type_keys


class HeteroMismatch(ValueError):
    """The loaded graph disagrees with the spec; ``field`` is the spec field to fix."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def _listed(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "(none)"


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
