"""The graph and the loaders of the PyG baselines: what each setup keeps where.

- ``stock``: features and labels in host memory, collated into each mini-batch by the
  loader's workers (``x``, ``y`` in the batch), no pinning; the loader as PyG's examples
  build it.
- ``best``: features and labels resident on the training device; the loader samples and
  returns node ids only (``n_id``, ``edge_index``), in pinned memory, with persistent
  workers and ``prefetch_factor`` 4; the training loop gathers ``x[n_id]`` and ``y`` on the
  device.

Both sample on the CPU with PyG's ``NeighborSampler`` (pyg-lib or torch-sparse), or, with
``sampler="distgnn"``, ``NodeLoader`` over our ``PyGNeighborSampler`` (no extension needed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from synthetic_gpu import generate
from torch import Tensor
from torch.utils.data import DataLoader

SETUPS = ("stock", "best")
SAMPLERS = ("pyg", "distgnn")


@dataclass
class Graph:
    """The benchmark graph: ``data`` for the loader (CPU), ``x``/``y`` where the setup keeps them."""

    data: Any  # torch_geometric.data.Data: edge_index sorted by target, on the CPU
    x: Tensor
    y: Tensor
    train_idx: Tensor
    num_nodes: int
    num_directed_edges: int


def build_graph(
    *,
    setup: str,
    device: torch.device,
    nodes: int,
    edges: int,
    features: int,
    classes: int,
    train_fraction: float,
    seed: int,
) -> Graph:
    """Generate the synthetic graph on ``device``; place features as ``setup`` says."""
    from torch_geometric.data import Data

    graph = generate(
        nodes,
        edges,
        features,
        classes,
        device=device,
        train_fraction=train_fraction,
        seed=seed,
    )
    deg = graph.indptr.diff()
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes, device=device), deg)
    # CSR rows are sorted, so edge_index is sorted by target: NeighborLoader skips its sort
    edge_index = torch.stack([graph.indices.to(torch.int64), dst]).cpu()
    if setup == "stock":
        x, y = graph.x.cpu(), graph.y.cpu()
        data = Data(x=x, y=y, edge_index=edge_index, num_nodes=graph.num_nodes)
    else:
        x, y = graph.x, graph.y  # stay on the device; the loader sees the topology only
        data = Data(edge_index=edge_index, num_nodes=graph.num_nodes)
    out = Graph(
        data=data,
        x=x,
        y=y,
        train_idx=graph.train_idx.cpu(),
        num_nodes=graph.num_nodes,
        num_directed_edges=int(edge_index.size(1)),
    )
    del graph, dst, deg
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def sampling_backend(sampler: str) -> str:
    """Which library samples: ``pyg-lib``, ``torch-sparse`` or ``distgnn``."""
    if sampler == "distgnn":
        return "distgnn"
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB:
        return "pyg-lib"
    if pyg_typing.WITH_TORCH_SPARSE:
        return "torch-sparse"
    raise SystemExit(
        "--sampler pyg: NeighborLoader needs pyg-lib or torch-sparse, and neither imports; "
        "install one, or pass --sampler distgnn (NodeLoader over our sampler)"
    )


def hop_counts_from_order(
    row: Tensor, col: Tensor, num_seeds: int, num_nodes: int, num_hops: int
) -> tuple[list[int], list[int]]:
    """Nodes and edges per hop of a sample laid out hop by hop, as torch-sparse returns it.

    torch-sparse's ``neighbor_sample`` appends each hop's new nodes after the previous
    ones and each hop's edges after the previous hop's, target by target, so the targets
    (``col``) never decrease and the last node a hop adds is the source of one of its edges.
    It returns no per-hop counts (pyg-lib does); ``trim_to_layer`` needs them. Raises
    ``ValueError`` if the sample is not laid out that way.
    """
    total_edges = int(col.numel())
    if total_edges > 1 and bool((col[1:] < col[:-1]).any()):
        raise ValueError("edge targets are not in hop order: cannot derive per-hop counts")
    nodes, edges = [num_seeds], []
    end, start = num_seeds, 0
    for _ in range(num_hops):
        stop = int(torch.searchsorted(col, torch.tensor([end], dtype=col.dtype)).item())
        new_end = end
        if stop > start:
            new_end = max(end, int(row[start:stop].max().item()) + 1)
        edges.append(stop - start)
        nodes.append(new_end - end)
        end, start = new_end, stop
    if end != num_nodes or start != total_edges:
        raise ValueError(
            f"sample is not laid out hop by hop ({end} of {num_nodes} nodes and {start} of "
            f"{total_edges} edges accounted for): cannot derive per-hop counts"
        )
    return nodes, edges


class HopCounts:
    """``transform_sampler_output``: fills in per-hop counts where the sampler gave none."""

    def __init__(self, num_hops: int) -> None:
        self.num_hops = num_hops

    def __call__(self, out: Any) -> Any:
        if out.num_sampled_nodes is None:
            num_seeds = int(out.metadata[0].numel())
            out.num_sampled_nodes, out.num_sampled_edges = hop_counts_from_order(
                out.row, out.col, num_seeds, int(out.node.numel()), self.num_hops
            )
        return out


def build_node_sampler(graph: Graph, *, sampler: str, fanout: list[int], seed: int) -> Any:
    """One sampler, shared by the loaders of every worker count (its CSC is built once)."""
    if sampler == "distgnn":
        from distgnn_workload.sampling import PyGNeighborSampler

        return PyGNeighborSampler(graph.data, fanout, seed=seed)
    from torch_geometric.sampler import NeighborSampler

    # as NeighborLoader builds it; shared memory lets fork'ed workers map, not copy, it
    return NeighborSampler(graph.data, fanout, is_sorted=True, share_memory=True)


def build_loader(
    graph: Graph,
    node_sampler: Any,
    *,
    setup: str,
    sampler: str,
    fanout: list[int],
    batch_size: int,
    workers: int,
    hop_counts: bool,
    pin: bool,
) -> DataLoader[Any]:
    """The setup's loader over the training seeds, with ``workers`` worker processes.

    ``hop_counts``: batches carry ``num_sampled_nodes``/``num_sampled_edges`` (for
    ``trim_to_layer``), derived in the workers where the sampler returns none.
    """
    kwargs = loader_kwargs(
        graph.train_idx, setup=setup, batch_size=batch_size, workers=workers, pin=pin
    )
    if hop_counts:
        kwargs["transform_sampler_output"] = HopCounts(len(fanout))
    loader: DataLoader[Any] = pyg_loader(graph.data, node_sampler, sampler, fanout, kwargs)
    return loader


def loader_kwargs(
    input_nodes: Any, *, setup: str, batch_size: int, workers: int, pin: bool
) -> dict[str, Any]:
    """A PyG loader's options: shuffled seeds, persistent workers; the best setup pins
    batches (on a GPU run) and prefetches 4 per worker."""
    kwargs: dict[str, Any] = {
        "batch_size": batch_size,
        "input_nodes": input_nodes,
        "shuffle": True,
        "num_workers": workers,
        "persistent_workers": workers > 0,
    }
    if setup == "best":
        kwargs["pin_memory"] = pin
        if workers > 0:
            kwargs["prefetch_factor"] = 4
    return kwargs


def pyg_loader(
    data: Any, node_sampler: Any, sampler: str, fanout: list[int], kwargs: dict[str, Any]
) -> Any:
    """distgnn: PyG's NodeLoader over our sampler; pyg: NeighborLoader with ``fanout``."""
    if sampler == "distgnn":
        from torch_geometric.loader import NodeLoader

        return NodeLoader(data, node_sampler=node_sampler, **kwargs)
    from torch_geometric.loader import NeighborLoader

    return NeighborLoader(data, num_neighbors=fanout, neighbor_sampler=node_sampler, **kwargs)


def close_loader(loader: DataLoader[Any]) -> None:
    """Stop a loader's persistent workers now (not whenever the loader is collected)."""
    iterator = getattr(loader, "_iterator", None)
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    if iterator is not None:
        loader._iterator = None
