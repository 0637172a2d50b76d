"""A random homogeneous graph for the runtime tests: uniform edges without self-loops,
normal features, 3 classes and random train/val/test splits."""

from __future__ import annotations

import numpy as np

from distgnn_workload.data.graph import GraphData


def random_graph(
    nodes: int, edges: int, features: int, seed: int, cuts: tuple[float, float] = (0.5, 0.7)
) -> GraphData:
    """``edges`` random pairs (self-loops dropped); a node trains below ``cuts[0]`` of a
    uniform draw, validates below ``cuts[1]`` and tests above."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
    keep = src != dst
    split = rng.random(nodes)
    train, val = cuts
    return GraphData.from_edges(
        src[keep],
        dst[keep],
        rng.standard_normal((nodes, features)).astype(np.float32),
        rng.integers(0, 3, nodes),
        split < train,
        (split >= train) & (split < val),
        split >= val,
        num_classes=3,
    )
