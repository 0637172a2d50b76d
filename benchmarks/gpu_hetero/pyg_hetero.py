"""PyG's heterogeneous baseline on the benchmark's MAG-shaped graph: hetero ``NeighborLoader``
+ ``to_hetero(GraphSAGE)`` with ``nn.Embedding`` for the featureless types, stock and best
effort (``pyg_hetero_setup.py`` says what each keeps where).

The same graph as ``bench.py`` (``--store``: its kept typed store; else ``syntheticMag`` at
``--scale`` generated again), the same fanout for every edge type, batch size, hidden width
and embedding size. Per worker count of ``--workers`` (one loader each, over one sampler) and
precision of ``--precision``: ``--warmup`` batches, then ``--repeats`` timed windows of
``--batches`` mini-batches from an endless stream of epochs (``--epochs N``: N whole epochs
per run instead). Each configuration's JSON line (``bench: pyg_hetero_train``) holds every
run, the median seeds/s with min-max, the data-wait share, and the sampled edges per seed per
edge type over its timed batches, PyG's and, after the timing, our typed sampler's over the
same seed batches (``edges_per_seed_distgnn_same_seeds``): what ``ratios.py`` compares. ``--budget`` skips what would not end in time
(``pyg_skipped``).

    python benchmarks/gpu_hetero/pyg_hetero.py --setup stock --workers 12 --store <dir>
    python benchmarks/gpu_hetero/pyg_hetero.py --setup best --workers 24 16 8 \\
        --precision bf16 fp32 --repeats 2 --budget 150 --store <dir> --out pyg.jsonl
    # without torch-sparse or pyg-lib (a laptop): NodeLoader over our sampler
    python benchmarks/gpu_hetero/pyg_hetero.py --sampler distgnn --device cpu --scale 0.002
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "benchmarks" / "gpu")]

from pyg_hetero_setup import (  # noqa: E402
    HeteroGraph,
    HeteroTrainer,
    build_graph,
    build_loader,
    build_node_sampler,
    load_graph,
    prepare,
)
from pyg_setups import SAMPLERS, SETUPS, close_loader, sampling_backend  # noqa: E402
from pyg_sweep import (  # noqa: E402
    BUDGET_MARGIN_S,
    Budget,
    WorkerSweep,
    emit,
    endless,
    process_started,
)
from pyg_timing import Run, Taken, summarise, sync  # noqa: E402

from distgnn_workload.sampling import SampledEdgesPerSeed  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--setup", choices=SETUPS, default="stock")
    p.add_argument("--device", default="cuda")
    p.add_argument("--store", type=Path, default=None, help="bench.py's kept typed store")
    p.add_argument("--scale", type=float, default=1.0, help="without --store")
    p.add_argument("--graph-seed", type=int, default=0)
    p.add_argument("--fanout", type=int, nargs="+", default=[25, 20])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument("--workers", type=int, nargs="+", default=[12], help="a sweep")
    p.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32"])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--epochs", type=int, default=0, help="whole epochs per run; 0: --batches")
    p.add_argument("--batches", type=int, default=40, help="batches per run when --epochs is 0")
    p.add_argument("--warmup", type=int, default=8, help="batches before each configuration")
    p.add_argument("--budget", type=float, default=None, help="seconds for the whole script")
    p.add_argument("--sampler", choices=SAMPLERS, default="pyg")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    for name in ("repeats", "batches"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.epochs < 0 or args.warmup < 0:
        p.error("--epochs and --warmup must be 0 or more")
    if any(w < 0 for w in args.workers):
        p.error("--workers: worker counts must be 0 or more")
    if args.budget is not None and args.budget <= BUDGET_MARGIN_S:
        p.error(f"--budget must be more than {BUDGET_MARGIN_S:.0f} seconds")
    return args


class Sweep(WorkerSweep):
    """The configurations (worker count x precision) of one setup."""

    def __init__(self, args: argparse.Namespace, g: HeteroGraph, budget: Budget, backend: str):
        self.args, self.g, self.budget = args, g, budget
        self.device = torch.device(args.device)
        self.sampler = build_node_sampler(g, sampler=args.sampler, fanout=args.fanout, seed=0)
        self.common = {"setup": args.setup, "sampler": args.sampler, "backend": backend}
        self.tables = {"fp32": g.x, "bf16": g.x.bfloat16() if args.setup == "best" else g.x}
        self.summaries: list[dict[str, Any]] = []
        self.ours: Any = None  # our sampler over the same graph, built on first use
        self.seeds: list[torch.Tensor] = []  # the seeds of the configuration's timed batches

    def run_workers(self, workers: int, estimate: float | None) -> float | None:
        a = self.args
        loader = build_loader(self.g, self.sampler, **self.loader_options(workers))
        try:
            stream = endless(loader)
            for precision in a.precision:
                what = {"workers": workers, "precision": precision}
                if not self.budget.fits(estimate):
                    self.skipped(what, estimate)
                    continue
                table = self.tables[precision]
                first = prepare(self.g, next(stream), self.device, table)
                trainer = HeteroTrainer(
                    self.g,
                    first,
                    hidden=a.hidden,
                    layers=len(a.fanout),
                    embedding_dim=a.embedding_dim,
                    device=self.device,
                    precision=precision,
                    seed=a.seed,
                )
                for _ in range(a.warmup):
                    trainer.step(prepare(self.g, next(stream), self.device, table))
                counts = SampledEdgesPerSeed()
                self.seeds = []
                runs: list[Run] = []
                for _ in range(a.repeats):
                    if not self.budget.fits(estimate):
                        break
                    if a.epochs:
                        run = self.timed(loader, None, trainer, table, counts, a.epochs)
                    else:
                        run = self.timed(stream, a.batches, trainer, table, counts, 1)
                    runs.append(run)
                    estimate = run.seconds
                if not runs:
                    self.skipped(what, estimate)
                    continue
                timing = {"timing": "epochs" if a.epochs else "batches"}
                timing["per_run"] = a.epochs or a.batches
                rec = {"bench": "pyg_hetero_train", **self.common, **what, **timing}
                rec.update(repeats=len(runs), **summarise(runs))
                rec.update(
                    edges_per_seed=counts.per_seed(),
                    edges_per_seed_total=counts.total_per_seed(),
                    seeds_counted=counts.seeds,
                )
                same = self.ours_on_same_seeds()
                rec.update(
                    edges_per_seed_distgnn_same_seeds=same.per_seed(),
                    edges_per_seed_distgnn_same_seeds_total=same.total_per_seed(),
                )
                emit(a.out, rec)
                self.summaries.append(rec)
            return estimate
        finally:
            close_loader(loader)

    def ours_on_same_seeds(self) -> SampledEdgesPerSeed:
        """Our typed sampler's edges per seed over the seeds of the timed batches, in the same
        batches: the pair that the 2% target compares, with no seed-set noise between them."""
        if self.ours is None:
            from distgnn_api.hetero_load import resolve_edge_fanouts
            from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
            from distgnn_workload.sampling.pyg_adapter import hetero_csr

            csr, _ = hetero_csr(self.g.data)
            self.ours = HeteroNeighborSampler(
                csr,
                self.g.node_counts,
                resolve_edge_fanouts(self.args.fanout, None, list(csr)),
                seed_type=self.g.target,
                device=self.device,
                seed=self.args.seed,
            )
        counts = SampledEdgesPerSeed()
        for seeds in self.seeds:
            counts.add_batch(self.ours.sample(seeds.to(self.device)))
        return counts

    def timed(
        self,
        batches: Any,
        count: int | None,
        trainer: HeteroTrainer,
        table: torch.Tensor,
        counts: SampledEdgesPerSeed,
        passes: int,
    ) -> Run:
        """``count`` batches of a stream (or ``passes`` whole epochs of a loader), trained."""
        sync(self.device)
        start = time.perf_counter()
        taken = Taken(count)
        seeds = edges = 0
        loss: torch.Tensor | None = None
        for _ in range(passes):
            for batch in taken.take(batches):
                loss = trainer.step(prepare(self.g, batch, self.device, table))
                counts.add_pyg(batch, self.g.target)
                bs = int(batch[self.g.target].batch_size)
                self.seeds.append(batch[self.g.target].n_id[:bs].clone())
                seeds += bs
                edges += sum(int(e.size(1)) for e in batch.edge_index_dict.values())
        sync(self.device)
        seconds = time.perf_counter() - start
        loss_value = None if loss is None else float(loss)
        return Run(seconds, taken.n, seeds, edges, taken.wait, loss_value)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budget = Budget(args.budget, process_started())
    t0 = time.perf_counter()
    device = torch.device(args.device)
    backend = sampling_backend(args.sampler)
    graph = load_graph(args.store, args.scale, args.graph_seed)
    g = build_graph(graph, setup=args.setup, device=device)
    del graph
    sweep = Sweep(args, g, budget, backend)
    import torch_geometric

    emit(
        args.out,
        {
            "bench": "pyg_hetero_env",
            **sweep.common,
            "torch": torch.__version__,
            "pyg": torch_geometric.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "cpus": os.cpu_count(),
            "node_counts": g.node_counts,
            "edge_types": ["__".join(et) for et in g.data.edge_types],
            "train_nodes": int(g.train_idx.numel()),
            "setup_seconds": round(time.perf_counter() - t0, 2),
            "workers": args.workers,
            "precision": args.precision,
            "fanout": args.fanout,
            "batch_size": args.batch_size,
            "hidden": args.hidden,
            "embedding_dim": args.embedding_dim,
        },
    )
    sweep.run()
    for r in sweep.summaries:
        if r["bench"] == "pyg_hetero_train":
            print(
                f"{r['setup']:<6} workers={r['workers']:<3} {r['precision']:<5} "
                f"seeds/s={r['seeds_per_s']:,.0f} ({r['seeds_per_s_min']:,.0f}-"
                f"{r['seeds_per_s_max']:,.0f}) wait={r['data_wait_share']:.1%} "
                f"edges/seed={r['edges_per_seed_total']:.1f}",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
