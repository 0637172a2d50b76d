"""``build_model`` and ``build_hetero_model``: the model a ``ModelSpec`` names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import nn

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.models.sage import GraphSAGE

HETERO_ARCHS = (Arch.rsage, Arch.rgcn)


def build_model(spec: ModelSpec, in_channels: int, out_channels: int) -> nn.Module:
    """GraphSAGE, GCN or GAT with ``forward(x, hop) -> logits of the seeds``."""
    if spec.arch in HETERO_ARCHS:
        raise ValueError(
            f"model.arch {spec.arch.value} is for heterogeneous graphs (build_hetero_model); "
            "a homogeneous dataset takes sage, gcn or gat"
        )
    if spec.arch == Arch.sage:
        return GraphSAGE(
            in_channels, spec.hidden_channels, out_channels, spec.num_layers, spec.dropout
        )
    # PyG convs are imported only when asked for: importing PyG takes seconds
    from distgnn_workload.models.pyg_convs import GAT, GCN

    if spec.arch == Arch.gcn:
        return GCN(in_channels, spec.hidden_channels, out_channels, spec.num_layers, spec.dropout)
    if spec.arch == Arch.gat:
        return GAT(
            in_channels,
            spec.hidden_channels,
            out_channels,
            spec.num_layers,
            heads=spec.heads,
            dropout=spec.dropout,
        )
    raise ValueError(f"model.arch {spec.arch!r} is not one of sage, gcn, gat")


def build_hetero_model(
    spec: ModelSpec,
    node_types: Sequence[str],
    edge_types: Sequence[EdgeType],
    in_channels: Mapping[str, int],
    out_channels: int,
    target_node_type: str | Sequence[str],
) -> nn.Module:
    """R-SAGE or R-GCN with ``forward(x: dict[type, Tensor], batch: HeteroHopBatch) -> logits
    of the seeds`` (rows in seed order).

    ``in_channels[t]`` is the width of node type ``t``'s inputs: its features, or the
    embedding size for a type without features. ``x[t]`` holds the inputs of every sampled
    node of type ``t``, in the batch's order.
    """
    from distgnn_workload.models.rgcn import RGCN
    from distgnn_workload.models.rsage import RSAGE

    args = (node_types, edge_types, in_channels, spec.hidden_channels, out_channels)
    if spec.arch == Arch.rsage:
        return RSAGE(*args, spec.num_layers, target_node_type, spec.dropout)
    if spec.arch == Arch.rgcn:
        return RGCN(*args, spec.num_layers, target_node_type, spec.dropout)
    raise ValueError(
        f"model.arch {spec.arch.value} is for homogeneous graphs; a heterogeneous dataset "
        "takes rsage or rgcn"
    )
