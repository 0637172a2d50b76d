"""Bytes between pods per mini-batch and per epoch, by kind, and the expected seeds/s.

A mini-batch of B seeds and fanouts f1..fL samples at most ``B f1 ... fh`` nodes at hop h,
fewer when nodes have fewer neighbours (the mean degree bounds each hop's fanout) and fewer
distinct ones (a node reached twice is one row): :func:`distgnn_api.pod_memory.expected_hops`. Remote rows are the
distinct non-seed nodes owned by another holder: the measured edge-cut share when known
(META.json, ``--edge-cut``), else ``(H-1)/H`` (a random partition), minus the hot cache's
share of them (``cacheRatio``; a hotness-ranked cache hits more often, so this is an upper
bound). A store's sampling probe (META.json's ``sampling_probe``, ``distgnn plan --meta``)
replaces these estimates, when it sampled batches of the job's shape: the distinct nodes per
batch (communities and skewed degrees make batches overlap far more than uniform draws),
the remote ones and the hot cache's hit rate, all measured on the graph itself. Gradients: a ring all-reduce moves ``2 (n-1)/n`` times the fp32 gradient per process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distgnn_api.capacity import Plan
from distgnn_api.spec import Arch, DistGNNJobSpec

ID_BYTES = 8  # node ids travel as int64 (runtime/features/remote.py, distributed_sampler.py)


@dataclass(frozen=True)
class Traffic:
    """Bytes one trainer process moves per mini-batch, by kind, and per epoch for the job."""

    per_batch: dict[str, float]
    steps_per_epoch: int
    trainer_processes: int
    remote_share: float
    remote_share_source: str

    @property
    def per_epoch(self) -> dict[str, float]:
        """Bytes of the whole job in one epoch, by kind."""
        n = self.steps_per_epoch * self.trainer_processes
        return {k: v * n for k, v in self.per_batch.items()}


def traffic(spec: DistGNNJobSpec, plan: Plan) -> Traffic:
    g, s = plan.graph, plan.shapes
    nodes, hop_edges = s.expected_nodes, s.expected_edges
    distinct = sum(nodes)
    h = s.holders
    if h == 1:
        share, why = 0.0, "one holder: every node is local"
    elif g.edge_cut_fraction is not None:
        share, why = g.edge_cut_fraction, "the measured edge cut"
    else:
        share, why = (h - 1) / h, f"(H-1)/H of a random partition, H={h} (an upper bound)"
    miss = 1.0 - spec.samplers.cache_ratio
    remote_rows = (distinct - nodes[0]) * share * miss
    probe = g.probe
    if probe is not None and probe.matches(spec) and h > 1:
        share = probe.remote_nodes / max(1.0, probe.distinct_nodes)
        why = "the store's sampling probe (META.json)"
        if probe.cache_ratio == spec.samplers.cache_ratio:
            miss = 1.0 - probe.cache_hit_rate
        remote_rows = probe.remote_nodes * miss
    row = g.num_features * s.feature_bytes
    per: dict[str, float] = {
        "remote feature rows": remote_rows * (row + ID_BYTES),
    }
    if not s.replicate and h > 1:
        # hop by hop: the frontier's remote nodes go out, their sampled neighbours come back
        frontier = [float(spec.training.batch_size), *hop_edges[:-1]]
        fanout = [e / f for e, f in zip(hop_edges, frontier, strict=True)]
        per["sampling requests"] = sum(
            f * share * ID_BYTES * (1 + k) for f, k in zip(frontier, fanout, strict=True)
        )
    if not spec.worker_mode:
        # the trainer asks a sampler for a batch and gets it whole (runtime/batches.py)
        per["mini-batches (sampler to trainer)"] = (
            spec.training.batch_size * ID_BYTES
            + distinct * (ID_BYTES + row)
            + sum(hop_edges) * 2 * 4
            + (sum(nodes[:-1]) + 1) * 8
            + spec.training.batch_size * 8
        )
    procs = spec.trainers.replicas * max(1, spec.trainers.gpus_per_pod)
    if procs > 1:
        per["gradients (ring all-reduce)"] = 2 * (procs - 1) / procs * s.params * 4
    steps = math.ceil(g.num_train_nodes / (spec.training.batch_size * procs))
    return Traffic(per, steps, procs, share, why)


# --------------------------------------------------------------------------- seeds/s

# Measured per GPU on 4 x H200, products-scale synthetic graph, 3-layer GraphSAGE, hidden 256,
# fanout 15/10/5, batch 1024, bf16, random partitions (docs/benchmarks.md,
# benchmarks/gpu_distributed/README.md): (mode, GPUs) -> seeds/s per GPU.
MEASURED_BF16 = {
    ("worker", 1): 240_000,
    ("worker", 2): 223_000,
    ("worker", 4): 220_000,
    ("server", 1): 217_000,
    ("server", 2): 194_000,
    ("server", 4): 180_000,
}
CACHE_02_SHARE = 145_000 / 223_000
"""2 GPUs, worker, cacheRatio 0.2 against cacheRatio 1 (same table)."""
FP32_SHARE = 191_000 / 265_000
"""fp32 against bf16, 1 GPU worker mode, one call (DESIGN.md, 2 x H200)."""
REFERENCE_EDGES_PER_SEED = 15 + 15 * 10 + 15 * 10 * 5
REFERENCE_HIDDEN = 256


@dataclass(frozen=True)
class Throughput:
    per_gpu: float
    total: float
    basis: str


def seeds_per_second(spec: DistGNNJobSpec, plan: Plan) -> Throughput | str:
    """An extrapolation from the measured figures, or why the plan cannot say."""
    if spec.trainers.gpus_per_pod == 0:
        return "no figure: CPU trainers were not benchmarked"
    if spec.model.arch != Arch.sage:
        return f"no figure: only GraphSAGE was benchmarked, not {spec.model.arch.value}"
    procs = spec.trainers.replicas * spec.trainers.gpus_per_pod
    mode = "worker" if spec.worker_mode else "server"
    gpus = 1 if procs == 1 else 2 if procs == 2 else 4
    rate = float(MEASURED_BF16[(mode, gpus)])
    basis = [f"{mode} mode on {gpus} GPU(s), measured {rate / 1000:.0f}k/GPU (H200, bf16)"]
    if not spec.training.bf16:
        rate *= FP32_SHARE
        basis.append(f"x {FP32_SHARE:.2f} for fp32")
    if plan.shapes.holders > 1 and spec.samplers.cache_ratio < 1.0:
        rate *= CACHE_02_SHARE
        basis.append(f"x {CACHE_02_SHARE:.2f} for remote features (measured at cacheRatio 0.2)")
    edges = 0
    frontier = 1
    for f in spec.model.fanout:
        frontier *= f
        edges += frontier
    work = (
        edges / REFERENCE_EDGES_PER_SEED * max(1.0, spec.model.hidden_channels / REFERENCE_HIDDEN)
    )
    if abs(work - 1.0) > 1e-9:
        rate /= work
        basis.append(f"/ {work:.2f} for the work per seed (edges x hidden)")
    if procs > 4:
        basis.append("4-GPU per-GPU figure held constant beyond one measured host")
    return Throughput(rate, rate * procs, "extrapolated: " + ", ".join(basis))
