"""The products-scale synthetic graph, generated with torch on the benchmark's device in seconds.

It follows the model of ``distgnn_workload.data.synthetic`` (a degree-corrected stochastic
block model: Zipf(0.5) class sizes, log-normal(sigma 1) expected degrees, ``homophily`` share
of intra-community edges, features = class centroid of norm 3 + N(0, ``feature_noise``^2)
noise, exactly ``num_edges`` distinct undirected edges stored in both directions), with
``SyntheticDataset``'s defaults for homophily and noise (calibrated so that GraphSAGE lands
near ogbn-products' accuracy: ``benchmarks/accuracy/``), but draws from torch's generators
instead of numpy's, so it is not byte-identical to that generator. The numpy generator needs
minutes at this scale on one CPU core; the benchmark's device time is short.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from distgnn_api.dataset import SyntheticDataset

# ogbn-products' shape, the default of every benchmark (and of SyntheticDataset).
PRODUCTS_NODES = 2_449_029
PRODUCTS_UNDIRECTED_EDGES = 61_859_140

CENTROID_NORM = 3.0
DEGREE_SIGMA = 1.0
CLASS_SKEW = 0.5
STUBS_PER_NODE = 8
_DEFAULTS = SyntheticDataset()
HOMOPHILY = _DEFAULTS.homophily
FEATURE_NOISE = _DEFAULTS.feature_noise


@dataclass
class SyntheticGraph:
    """CSR topology (``indices[indptr[v]:indptr[v+1]]`` = neighbours of v), features, labels."""

    indptr: Tensor
    indices: Tensor
    x: Tensor
    y: Tensor
    train_idx: Tensor
    num_classes: int
    seconds: float = 0.0
    info: dict[str, float] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()


def generate(
    num_nodes: int,
    num_edges: int,
    num_features: int,
    num_classes: int,
    *,
    device: torch.device | str,
    homophily: float = HOMOPHILY,
    feature_noise: float = FEATURE_NOISE,
    train_fraction: float = 0.08,
    seed: int = 0,
) -> SyntheticGraph:
    """``num_edges`` undirected edges (2 * num_edges directed) on ``num_nodes`` nodes."""
    start = time.perf_counter()
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(seed)
    n, m, c = num_nodes, num_edges, num_classes
    if m > n * (n - 1) // 2:
        raise ValueError(f"num_edges={m} is more than a simple graph on {n} nodes can have")

    class_p = 1.0 / torch.arange(1, c + 1, dtype=torch.float64, device=dev) ** CLASS_SKEW
    y = torch.multinomial(class_p.float(), n, replacement=True, generator=g)
    w = torch.empty(n, dtype=torch.float64, device=dev).log_normal_(0.0, DEGREE_SIGMA, generator=g)
    copies = torch.clamp(torch.round(w / w.mean() * STUBS_PER_NODE), min=1).to(torch.int64)
    order = torch.argsort(y, stable=True)
    stubs = torch.repeat_interleave(order, copies[order])  # node ids grouped by community
    comm_stubs = torch.bincount(y[stubs], minlength=c)
    comm_start = torch.cumsum(comm_stubs, 0) - comm_stubs
    del w, copies, order

    keys = torch.empty(0, dtype=torch.int64, device=dev)
    while keys.numel() < m:
        want = int((m - keys.numel()) * 1.05) + 1024
        u = stubs[torch.randint(0, stubs.numel(), (want,), device=dev, generator=g)]
        v = torch.empty_like(u)
        intra = torch.rand(want, device=dev, generator=g) < homophily
        cu = y[u[intra]]
        pick = (
            torch.rand(cu.numel(), device=dev, generator=g, dtype=torch.float64) * comm_stubs[cu]
        ).long()
        v[intra] = stubs[comm_start[cu] + pick]
        inter = (~intra).nonzero().squeeze(1)
        while inter.numel():
            v[inter] = stubs[
                torch.randint(0, stubs.numel(), (inter.numel(),), device=dev, generator=g)
            ]
            inter = inter[y[v[inter]] == y[u[inter]]]
        lo, hi = torch.minimum(u, v), torch.maximum(u, v)
        new = (lo * n + hi)[lo != hi]
        keys = torch.unique(torch.cat([keys, new]))  # sorted, distinct
    if keys.numel() > m:
        keep = torch.randperm(keys.numel(), device=dev, generator=g)[:m]
        keys = keys[keep]
    del stubs

    both = torch.cat([keys, (keys % n) * n + keys // n])
    del keys
    both = torch.sort(both).values
    src = both // n
    indices = (both % n).to(torch.int32)
    del both
    counts = torch.bincount(src, minlength=n)
    del src
    indptr = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    torch.cumsum(counts, 0, out=indptr[1:])

    centroids = torch.randn(c, num_features, device=dev, generator=g)
    centroids *= CENTROID_NORM / centroids.norm(dim=1, keepdim=True)
    x = torch.randn(n, num_features, device=dev, generator=g)
    x *= feature_noise
    x += centroids[y]
    train_idx = torch.randperm(n, device=dev, generator=g)[: max(1, round(train_fraction * n))]
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    deg = counts.double()
    return SyntheticGraph(
        indptr=indptr,
        indices=indices,
        x=x,
        y=y,
        train_idx=train_idx,
        num_classes=c,
        seconds=time.perf_counter() - start,
        info={
            "homophily": homophily,
            "feature_noise": feature_noise,
            "mean_degree": float(deg.mean()),
            "max_degree": float(deg.max()),
            "median_degree": float(deg.median()),
            "zero_degree_share": float((counts == 0).double().mean()),
        },
    )
