"""Command-line options that the benchmark scripts share, with the reference workload's
defaults: the products-shaped synthetic graph, and GraphSAGE with fanout [15, 10, 5], hidden
256 and batches of 1024 seeds."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, get_args

from synthetic_gpu import PRODUCTS_NODES, PRODUCTS_UNDIRECTED_EDGES

from distgnn_workload.models.aggregation import Aggregation


def add_graph_args(
    p: argparse.ArgumentParser,
    *,
    edges_default: int | None = None,
    edges_help: str | None = None,
    train_fraction: bool = True,
) -> None:
    """``--nodes``, ``--edges``, ``--features``, ``--classes`` and, with ``train_fraction``,
    ``--train-fraction`` of the synthetic graph."""
    p.add_argument("--nodes", type=int, default=PRODUCTS_NODES)
    p.add_argument("--edges", type=int, default=edges_default, help=edges_help)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--classes", type=int, default=47)
    if train_fraction:
        p.add_argument("--train-fraction", type=float, default=0.08)


def products_edges(args: argparse.Namespace) -> int:
    """``--edges``, or as many per node as products has."""
    return int(args.edges or round(args.nodes * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES))


def add_aggregation_args(p: argparse.ArgumentParser, default: Sequence[str]) -> None:
    """``--aggregations``: the ways of SAGE's neighbour mean to run (its default: segment)."""
    p.add_argument(
        "--aggregations",
        nargs="+",
        default=list(default),
        choices=list(get_args(Aggregation)),
        help="SAGE's neighbour mean: embedding_bag, segment (the models' default), kernel "
        "(the Triton segment kernel) or scatter",
    )


def graph_options(args: argparse.Namespace) -> dict[str, Any]:
    """The graph that ``add_graph_args`` and ``--seed`` describe, as keyword arguments."""
    names = ("nodes", "edges", "features", "classes", "train_fraction", "seed")
    return {name: getattr(args, name) for name in names}


def add_model_args(
    p: argparse.ArgumentParser,
    *,
    fanout: Sequence[int] = (15, 10, 5),
    hidden: int = 256,
    fanout_help: str | None = None,
    batch_help: str | None = None,
) -> None:
    """``--fanout`` (one layer per entry), ``--batch-size`` and ``--hidden``."""
    p.add_argument("--fanout", type=int, nargs="+", default=list(fanout), help=fanout_help)
    p.add_argument("--batch-size", type=int, default=1024, help=batch_help)
    p.add_argument("--hidden", type=int, default=hidden)
