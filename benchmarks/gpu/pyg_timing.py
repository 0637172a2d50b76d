"""The model, the training step and the timed runs of the PyG baselines.

A run is one timed window: ``batches`` mini-batches taken from an endless stream of epochs
(the stock setup's measurement), ``epochs`` whole passes over the loader (each one starts a
new epoch, as a training loop does), or the training step alone over pre-sampled batches
already on the device. A configuration repeats its run; its record holds every run, the
median and the min-max spread.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class Batch:
    """A mini-batch on the training device, ready for the step."""

    x: Tensor
    y: Tensor
    edge_index: Tensor
    batch_size: int
    nodes_per_hop: list[int] | None
    edges_per_hop: list[int] | None

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.size(1))


def hop_lists(batch: Any) -> tuple[list[int] | None, list[int] | None]:
    # absent (not None) on a Data that NeighborLoader collated from torch-sparse's output
    nodes = getattr(batch, "num_sampled_nodes", None)
    edges = getattr(batch, "num_sampled_edges", None)
    if nodes is None or edges is None:
        return None, None
    return [int(n) for n in nodes], [int(e) for e in edges]


def from_stock(batch: Any, device: torch.device) -> Batch:
    """Features and labels came collated in the batch: copy them to the device."""
    bs = int(batch.batch_size)
    nodes, edges = hop_lists(batch)
    return Batch(
        x=batch.x.to(device, non_blocking=True),
        y=batch.y[:bs].to(device, non_blocking=True),
        edge_index=batch.edge_index.to(device, non_blocking=True),
        batch_size=bs,
        nodes_per_hop=nodes,
        edges_per_hop=edges,
    )


class DeviceGather:
    """Node ids came in the batch: gather features and labels resident on the device."""

    def __init__(self, x: Tensor, y: Tensor) -> None:
        self.x, self.y = x, y

    def __call__(self, batch: Any, device: torch.device) -> Batch:
        bs = int(batch.batch_size)
        n_id = batch.n_id.to(device, non_blocking=True)
        nodes, edges = hop_lists(batch)
        return Batch(
            x=self.x[n_id],
            y=self.y[n_id[:bs]],
            edge_index=batch.edge_index.to(device, non_blocking=True),
            batch_size=bs,
            nodes_per_hop=nodes,
            edges_per_hop=edges,
        )


class Trainer:
    """PyG's GraphSAGE + Adam; fp32 or bf16 autocast; the forward trimmed per layer or not."""

    def __init__(
        self,
        *,
        features: int,
        hidden: int,
        layers: int,
        classes: int,
        device: torch.device,
        precision: str,
        trim: bool,
        seed: int,
    ) -> None:
        from torch_geometric.nn.models import GraphSAGE

        torch.manual_seed(seed)
        self.model = GraphSAGE(features, hidden, layers, classes, dropout=0.5).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-3)
        self.device, self.precision, self.trim = device, precision, trim

    def autocast(self) -> AbstractContextManager[Any]:
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    def step(self, b: Batch) -> Tensor:
        with self.autocast():
            if self.trim:
                if b.nodes_per_hop is None or b.edges_per_hop is None:
                    raise RuntimeError("trim: the batch carries no per-hop counts")
                out = self.model(
                    b.x,
                    b.edge_index,
                    num_sampled_nodes_per_hop=b.nodes_per_hop,
                    num_sampled_edges_per_hop=b.edges_per_hop,
                )
            else:
                out = self.model(b.x, b.edge_index)
            loss = F.cross_entropy(out[: b.batch_size], b.y)
        self.opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        self.opt.step()
        return loss.detach()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Run:
    """One timed window."""

    seconds: float
    batches: int
    seeds: int
    edges: int
    wait: float
    last_loss: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seconds": round(self.seconds, 4),
            "batches": self.batches,
            "seeds_per_s": self.seeds / self.seconds,
            "sampled_edges_per_s": self.edges / self.seconds,
            "data_wait_share": self.wait / self.seconds,
            "ms_per_batch": 1e3 * self.seconds / max(1, self.batches),
        }
        if self.last_loss is not None:
            out["last_loss"] = self.last_loss
        return out


Prepare = Callable[[Any, torch.device], Batch]


class Taken:
    """At most ``count`` batches (None: all), counted across the iterables they come from;
    ``wait`` is the time spent waiting for them (in ``next``)."""

    def __init__(self, count: int | None) -> None:
        self.count = count
        self.n = 0
        self.wait = 0.0

    def take(self, batches: Iterable[Any]) -> Iterator[Any]:
        it = iter(batches)
        while self.count is None or self.n < self.count:
            t0 = time.perf_counter()
            batch = next(it, None)
            self.wait += time.perf_counter() - t0
            if batch is None:
                return
            self.n += 1
            yield batch


def timed(
    batches: Iterable[Any],
    count: int | None,
    *,
    device: torch.device,
    prepare: Prepare | None = None,
    trainer: Trainer | None = None,
) -> Run:
    """Take ``count`` batches (all, if None) and, with a trainer, train on each.

    ``iter(batches)`` is timed too: over a loader it starts an epoch (persistent workers
    are told to resume); over a running stream it is the stream itself.
    """
    sync(device)
    start = time.perf_counter()
    taken = Taken(count)
    seeds = edges = 0
    loss: Tensor | None = None
    for batch in taken.take(batches):
        if trainer is not None and prepare is not None:
            loss = trainer.step(prepare(batch, device))
        seeds += int(batch.batch_size)
        edges += int(batch.edge_index.size(1))
    sync(device)
    seconds = time.perf_counter() - start
    return Run(seconds, taken.n, seeds, edges, taken.wait, None if loss is None else float(loss))


def timed_step(trainer: Trainer, batches: list[Batch], passes: int) -> Run:
    """The training step alone, ``passes`` times over batches already on the device."""
    sync(trainer.device)
    start = time.perf_counter()
    loss: Tensor | None = None
    for _ in range(passes):
        for b in batches:
            loss = trainer.step(b)
    sync(trainer.device)
    seconds = time.perf_counter() - start
    n = passes * len(batches)
    return Run(
        seconds,
        n,
        passes * sum(b.batch_size for b in batches),
        passes * sum(b.num_edges for b in batches),
        0.0,
        None if loss is None else float(loss),
    )


def summarise(runs: list[Run]) -> dict[str, Any]:
    """Every run, and per metric the median; min, max and relative spread of seeds/s."""
    rows = [r.as_dict() for r in runs]
    rates = [r["seeds_per_s"] for r in rows]
    median = statistics.median(rates)
    out: dict[str, Any] = {
        "runs": rows,
        "seeds_per_s": median,
        "seeds_per_s_min": min(rates),
        "seeds_per_s_max": max(rates),
        "spread": (max(rates) - min(rates)) / median if median > 0 else 0.0,
    }
    for key in ("sampled_edges_per_s", "data_wait_share", "ms_per_batch"):
        out[key] = statistics.median(r[key] for r in rows)
    if "last_loss" in rows[-1]:
        out["last_loss"] = rows[-1]["last_loss"]
    return out
