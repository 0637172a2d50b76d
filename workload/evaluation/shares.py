"""Which destination nodes each trainer computes in layer-wise inference: per node type, a
contiguous id range per rank."""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def node_shares(offsets: Sequence[int], world_size: int) -> list[tuple[int, int]]:
    """The contiguous id range ``[lo, hi)`` each rank computes, for every rank.

    Whole partitions when the ranks divide them evenly (a rank then reads mostly its own
    partitions' rows and neighbours, which METIS keeps local), else an even split of the
    ids. Every rank gets at least one node.
    """
    num_nodes = int(offsets[-1])
    num_partitions = len(offsets) - 1
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if num_nodes < world_size:
        raise ValueError(
            f"{num_nodes} nodes cannot give each of {world_size} trainers a share; "
            "use fewer trainers or a larger graph"
        )
    if num_partitions % world_size == 0:
        per = num_partitions // world_size
        bounds = [int(offsets[r * per]) for r in range(world_size)] + [num_nodes]
        if all(a < b for a, b in itertools.pairwise(bounds)):
            return list(itertools.pairwise(bounds))
    bounds = [num_nodes * r // world_size for r in range(world_size + 1)]
    return list(itertools.pairwise(bounds))


def typed_shares(num_nodes: int, world_size: int) -> list[tuple[int, int]]:
    """The contiguous id range ``[lo, hi)`` of one node type that each rank computes (an even
    split; a rank's share is empty when the type has fewer nodes than ranks)."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    bounds = [num_nodes * r // world_size for r in range(world_size + 1)]
    return list(itertools.pairwise(bounds))
