"""Node and edge types of heterogeneous graphs: one spelling for the spec, the store and the
workload.

An edge type is PyG's ``(src, rel, dst)`` triple. Where it must be a single string (a spec's
map key, a file name, a metric label) it is written ``src__rel__dst``, as PyG's
``HeteroData`` prints it. The reverse of a relation between two types is ``rev_<rel>``, as
``torch_geometric.transforms.ToUndirected`` names it; a relation within one type is made
undirected in place and has no separate reverse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

EdgeType = tuple[str, str, str]
"""``(source node type, relation, destination node type)``."""

KEY_SEPARATOR: Final = "__"
REVERSE_PREFIX: Final = "rev_"

NAME_PATTERN: Final = r"[A-Za-z][A-Za-z0-9_]{0,62}"
"""A node type or relation name: a letter, then letters, digits or single underscores; it
never contains the separator ``__`` and never ends with ``_``."""

_NAME = re.compile(NAME_PATTERN)
KEY_PATTERN: Final = rf"^{NAME_PATTERN}{KEY_SEPARATOR}{NAME_PATTERN}{KEY_SEPARATOR}{NAME_PATTERN}$"

STRICT_NAME_PATTERN: Final = r"[A-Za-z](_?[A-Za-z0-9])*"
"""The whole rule of a type name but its length, in RE2 (no look-ahead), for CEL's
``matches``: a letter, then letters and digits, each maybe after one underscore."""
STRICT_KEY_PATTERN: Final = (
    rf"^{STRICT_NAME_PATTERN}{KEY_SEPARATOR}{STRICT_NAME_PATTERN}{KEY_SEPARATOR}"
    rf"{STRICT_NAME_PATTERN}$"
)
"""An edge-type key ``src__rel__dst`` in RE2, for the CRD's rules (names' lengths apart)."""
MAX_NAME_LENGTH: Final = 63


def is_type_name(name: str) -> bool:
    """Whether ``name`` can name a node type or a relation."""
    # fullmatch: "paper\n" is no name (re's "$" would let a final newline through).
    return bool(_NAME.fullmatch(name)) and KEY_SEPARATOR not in name and not name.endswith("_")


def edge_type_key(edge_type: EdgeType) -> str:
    """``("author", "writes", "paper")`` -> ``"author__writes__paper"``."""
    for part in edge_type:
        if not is_type_name(part):
            raise ValueError(
                f"{part!r} in edge type {edge_type!r} is not a type name: use letters, digits "
                "and single underscores, starting with a letter"
            )
    return KEY_SEPARATOR.join(edge_type)


def edge_type_keys(edge_types: Iterable[EdgeType]) -> list[str]:
    """The keys of several edge types, in order."""
    return [edge_type_key(et) for et in edge_types]


def parse_edge_type_key(key: str) -> EdgeType:
    """``"author__writes__paper"`` -> ``("author", "writes", "paper")``, or ValueError."""
    parts = key.split(KEY_SEPARATOR)
    if len(parts) != 3 or not all(is_type_name(p) for p in parts):
        raise ValueError(
            f"{key!r} is not an edge type: write it as src__rel__dst, e.g. author__writes__paper"
        )
    return parts[0], parts[1], parts[2]


def reverse_edge_type(edge_type: EdgeType) -> EdgeType:
    """The relation that carries ``edge_type``'s messages back: ``rev_<rel>`` between the two
    types swapped. A relation within one type is its own reverse (made undirected in place)."""
    src, rel, dst = edge_type
    if src == dst:
        return edge_type
    if rel.startswith(REVERSE_PREFIX):
        return dst, rel[len(REVERSE_PREFIX) :], src
    return dst, REVERSE_PREFIX + rel, src
