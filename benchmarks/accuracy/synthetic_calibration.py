"""How hard the products-shaped synthetic graph is: test accuracy of a GraphSAGE and of an MLP
(each node's own features only) at given homophily and feature noise, on CPU, at any scale.

The graph is ``distgnn_workload.data.synthetic.generate``'s at products' density (25.26
undirected edges per node), 100 features, 47 classes, 8% training and 2% validation nodes.
Three models, each picked at its best validation accuracy, tested on the test split:

- ``mlp``: 3 layers, hidden 256, on a node's own features (no graph);
- ``sign``: the same MLP on ``[x, A x, A^2 x, A^3 x]`` with ``A`` the mean over in-neighbours,
  precomputed (SIGN): what 3 hops of whole neighbourhoods can tell, at the cost of an MLP;
- ``sage``: the workload's own 3-layer GraphSAGE (hidden 256, dropout 0.5), trained on
  mini-batches that the workload's own ``NeighborSampler`` draws at fanout 15/10/5 (Adam,
  lr 0.003, as the trainer does), evaluated with whole neighbourhoods as the trainer's final
  test is (``evaluation.test: full``).

One JSON line per (scale, homophily, noise, model) on stdout and in ``--out``::

    python benchmarks/accuracy/synthetic_calibration.py --nodes 50000 200000 \\
        --homophily 0.1 0.15 --noise 1.25 --models mlp sign --out /tmp/cal.jsonl
    python benchmarks/accuracy/synthetic_calibration.py --nodes 50000 --models sage \\
        --sage-steps 300

Without ``--homophily``/``--noise`` it takes ``SyntheticDataset``'s defaults. ``README.md``
beside this file has the measured table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu_distributed"))

from records import emit

from distgnn_api.spec import Arch, ModelSpec, SyntheticDataset
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.synthetic import generate
from distgnn_workload.models import build_model
from distgnn_workload.models.layerwise import full_graph_hop
from distgnn_workload.sampling.one_type_sampler import NeighborSampler

PRODUCTS_NODES = 2_449_029
PRODUCTS_UNDIRECTED_EDGES = 61_859_140
HIDDEN = 256
FANOUT = [15, 10, 5]
LEARNING_RATE = 0.003
DROPOUT = 0.5


@dataclass
class Split:
    x: Tensor
    y: Tensor
    train: Tensor
    val: Tensor
    test: Tensor


def products_graph(
    nodes: int, homophily: float, noise: float, seed: int, train_fraction: float
) -> GraphData:
    """The synthetic graph at products' density, 100 features, 47 classes."""
    edges = round(nodes * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES)
    spec = SyntheticDataset(
        num_nodes=nodes,
        num_edges=edges,
        num_features=100,
        num_classes=47,
        homophily=homophily,
        feature_noise=noise,
        train_fraction=train_fraction,
        seed=seed,
    )
    return generate(spec)


def mean_operator(g: GraphData) -> Tensor:
    """The mean over each node's in-neighbours as a sparse CSR matrix (isolated rows: 0)."""
    deg = np.maximum(g.degrees(), 1).astype(np.float32)
    values = np.repeat(1.0 / deg, g.degrees()).astype(np.float32)
    return torch.sparse_csr_tensor(
        torch.from_numpy(g.indptr.astype(np.int64)),
        torch.from_numpy(g.indices.astype(np.int64)),
        torch.from_numpy(values),
        size=(g.num_nodes, g.num_nodes),
    )


def split_of(g: GraphData, x: Tensor, test_nodes: int) -> Split:
    """The splits' ids; at most ``test_nodes`` test nodes (a fixed random subset)."""
    test = np.flatnonzero(g.test_mask)
    if len(test) > test_nodes:
        test = np.sort(np.random.default_rng(0).choice(test, test_nodes, replace=False))
    return Split(
        x=x,
        y=torch.from_numpy(g.y),
        train=torch.from_numpy(np.flatnonzero(g.train_mask)),
        val=torch.from_numpy(np.flatnonzero(g.val_mask)),
        test=torch.from_numpy(test),
    )


def batches(train: Tensor, batch: int, steps: int) -> Iterator[Tensor]:
    """``steps`` batches of training ids, reshuffled at each pass over them."""
    order, at = train[torch.randperm(train.numel())], 0
    for _ in range(steps):
        if at + batch > order.numel():
            order, at = train[torch.randperm(train.numel())], 0
        yield order[at : at + batch]
        at += batch


def mlp(in_channels: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(in_channels, HIDDEN),
        nn.ReLU(),
        nn.Dropout(DROPOUT),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Dropout(DROPOUT),
        nn.Linear(HIDDEN, classes),
    )


def accuracy(logits: Tensor, y: Tensor) -> float:
    return float((logits.argmax(1) == y).float().mean())


def train_mlp(d: Split, classes: int, steps: int, batch: int, every: int) -> dict[str, Any]:
    """``steps`` mini-batches; the test accuracy at the best validation (checked every
    ``every`` steps) and at the end."""
    torch.manual_seed(0)
    model = mlp(d.x.size(1), classes)
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)

    def evaluate() -> tuple[float, float]:
        model.eval()
        with torch.no_grad():
            return (
                accuracy(model(d.x[d.val]), d.y[d.val]),
                accuracy(model(d.x[d.test]), d.y[d.test]),
            )

    def step(ids: Tensor) -> None:
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(d.x[ids]), d.y[ids]).backward()
        opt.step()

    return _train(d.train, steps, batch, every, step, evaluate)


def train_sage(g: GraphData, d: Split, steps: int, batch: int, every: int) -> dict[str, Any]:
    """The workload's GraphSAGE on the workload sampler's mini-batches; whole-neighbourhood
    evaluation every ``every`` steps."""
    torch.manual_seed(0)
    spec = ModelSpec(arch=Arch.sage, hidden_channels=HIDDEN, num_layers=3, fanout=FANOUT)
    model = build_model(spec, g.num_features, g.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    sampler = NeighborSampler(g.indptr, g.indices, FANOUT, seed=0)
    whole = full_graph_hop(torch.from_numpy(g.indptr), torch.from_numpy(g.indices), 3)

    def evaluate() -> tuple[float, float]:
        model.eval()
        with torch.no_grad():
            logits = model(d.x, whole)
        return accuracy(logits[d.val], d.y[d.val]), accuracy(logits[d.test], d.y[d.test])

    def step(seeds: Tensor) -> None:
        model.train()
        hop = sampler.sample(seeds)
        opt.zero_grad()
        F.cross_entropy(model(d.x[hop.node_ids], hop), d.y[hop.seed_ids]).backward()
        opt.step()

    return _train(d.train, steps, batch, every, step, evaluate)


def _train(
    train: Tensor,
    steps: int,
    batch: int,
    every: int,
    step: Callable[[Tensor], None],
    evaluate: Callable[[], tuple[float, float]],
) -> dict[str, Any]:
    best = (-1.0, 0.0, 0)
    curve = []
    for i, ids in enumerate(batches(train, batch, steps), start=1):
        step(ids)
        if i % every == 0 or i == steps:
            val, test = evaluate()
            curve.append([i, round(test, 4)])
            if val > best[0]:
                best = (val, test, i)
    return {
        "val_accuracy": round(best[0], 4),
        "test_accuracy": round(best[1], 4),
        "best_step": best[2],
        "final_test_accuracy": curve[-1][1],
        "test_curve": curve,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = SyntheticDataset()
    p.add_argument("--nodes", type=int, nargs="+", default=[50_000])
    p.add_argument("--homophily", type=float, nargs="+", default=[defaults.homophily])
    p.add_argument("--noise", type=float, nargs="+", default=[defaults.feature_noise])
    p.add_argument("--models", nargs="+", default=["mlp", "sign"], choices=["mlp", "sign", "sage"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--train-fraction",
        type=float,
        default=defaults.train_fraction,
        help="a larger share at a reduced scale gives the models as many training nodes as "
        "they have at full scale",
    )
    p.add_argument("--steps", type=int, default=600, help="mini-batches (3 products epochs: 575)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--eval-every", type=int, default=100, help="steps")
    p.add_argument(
        "--test-nodes", type=int, default=20_000, help="a fixed subset of the test split"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


def sign_inputs(g: GraphData, x: Tensor) -> Tensor:
    """``[x, A x, A^2 x, A^3 x]``, ``A`` the mean over in-neighbours."""
    a = mean_operator(g)
    hops = [x]
    for _ in range(3):
        hops.append(a @ hops[-1])
    return torch.cat(hops, dim=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    for nodes in args.nodes:
        for h in args.homophily:
            for noise in args.noise:
                t0 = time.perf_counter()
                g = products_graph(nodes, h, noise, args.seed, args.train_fraction)
                base = {
                    "nodes": nodes,
                    "directed_edges": int(g.num_edges),
                    "homophily": h,
                    "feature_noise": noise,
                    "train_nodes": int(g.train_mask.sum()),
                    "seed": args.seed,
                    "steps": args.steps,
                    "batch_size": args.batch_size,
                    "generate_s": round(time.perf_counter() - t0, 1),
                }
                x = torch.from_numpy(g.x)
                for name in args.models:
                    t1 = time.perf_counter()
                    if name == "sage":
                        d = split_of(g, x, args.test_nodes)
                        figures = train_sage(g, d, args.steps, args.batch_size, args.eval_every)
                    else:
                        inputs = sign_inputs(g, x) if name == "sign" else x
                        d = split_of(g, inputs, args.test_nodes)
                        figures = train_mlp(
                            d, g.num_classes, args.steps, args.batch_size, args.eval_every
                        )
                    seconds = round(time.perf_counter() - t1, 1)
                    emit(args.out, {**base, "model": name, **figures, "seconds": seconds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
