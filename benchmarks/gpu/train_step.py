"""The training step and the epoch loader that the single-GPU benches time: GraphSAGE's
forward under optional bf16 autocast, cross-entropy, backward, optimiser step; shuffled
batches of the training nodes with the last short one dropped."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from synthetic_gpu import SyntheticGraph
from torch import Tensor

from distgnn_workload.loader import BatchLoader, LocalFeatureSource, MiniBatch
from distgnn_workload.sampling import NeighborSampler


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (nothing to wait for on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, device: torch.device, bf16: bool
) -> Callable[[MiniBatch], Tensor]:
    """One optimiser step on a batch; returns the loss, still on the device."""

    def step(batch: MiniBatch) -> Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(batch.x, batch.hop)
            loss = F.cross_entropy(out, batch.y)
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        opt.step()
        return loss.detach()

    return step


def train_loader(
    graph: SyntheticGraph,
    sampler: NeighborSampler,
    feats: LocalFeatureSource,
    batch_size: int,
    device: torch.device,
    prefetch: int,
    seed: int = 0,
) -> BatchLoader:
    """An epoch of shuffled ``batch_size`` batches of the graph's training nodes."""
    return BatchLoader(
        graph.train_idx,
        sampler,
        feats,
        graph.y,
        batch_size,
        shuffle=True,
        prefetch=prefetch,
        device=device,
        drop_last=True,
        seed=seed,
    )
