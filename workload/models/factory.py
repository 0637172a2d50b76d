"""``build_model``: the model a ``ModelSpec`` names."""

from __future__ import annotations

from torch import nn

from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.models.sage import GraphSAGE


def build_model(spec: ModelSpec, in_channels: int, out_channels: int) -> nn.Module:
    """GraphSAGE, GCN or GAT with ``forward(x, hop) -> logits of the seeds``."""
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
