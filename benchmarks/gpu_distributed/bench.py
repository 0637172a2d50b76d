"""Distributed training throughput: the real entry points, started as ``distgnn run`` starts
them, on any number of GPUs.

Generates the products-scale synthetic graph on the GPU (``benchmarks/gpu/synthetic_gpu.py``)
and writes one partition store with random partitions, reused by every run: as many
partitions as the least common multiple of the runs' GPU counts (2 for runs on 1 and 2 GPUs,
4 with a 4-GPU run), so that every run's holders own equal blocks. Each run of ``--runs``
(``mode-gpus-precision[-cacheRatio]``) renders the job with the operator's builders and
starts its pods as local processes through the launch plan of ``distgnn run``
(``distgnn_operator.local.job_plan``), one trainer process per GPU with NCCL:

- worker mode (trainers sample their own partitions; features of other partitions come
  from the hot-feature cache, the rest from their owners) and server-client mode (sampler
  processes, one per GPU, write feature-complete mini-batches into shared slots of the
  trainers; RPC carries requests and sizes);
- 1 to N GPUs (one trainer pod per GPU);
- fp32 and bf16 (autocast, bf16 features); cacheRatio 1 unless given.

Each run trains ``--epochs`` epochs (3-layer GraphSAGE, hidden 256, fanout 15/10/5, batch
1024 per GPU) with evaluation every ``--eval-every`` epochs, as the examples do; the first
epoch is warm-up. ``--repeats N`` runs each configuration N times in this call. From the
trainers' ``training_stats.json`` it reports, as JSON lines: seeds/s per GPU, sampled
edges/s, the data-wait share (how long the training stream stalled for data, over the epoch
time; the host-side wait too), each GPU's utilisation and which process holds a context on
which GPU (``gpu_contexts``, from ``nvidia-smi``), whether the training step ran as a CUDA
graph and how many shared slots were mapped. A run that does not finish within
``--run-timeout`` is reported as ``hung``, with the stacks of every process still running
(``py-spy dump`` when it is on PATH, and the workload's faulthandler through SIGUSR1).
Then per configuration the median and spread (min-max) of seeds/s per GPU over the
repeats, the scaling from 1 GPU to each larger count (medians, runs of this call only) and,
with ``--pyg-baseline``, the PyG ``NeighborLoader`` baseline
(``benchmarks/gpu/pyg_baseline.py``) on the same graph (at the ``pyg`` place of ``--runs``)
and the ratios to it. ``--profile RUN...`` writes a torch.profiler table and a chrome trace
of trainer 0's steps 20-40 of its first epoch.

On the device machine (the repository copied there, the wheels of
``../shared/wheels/gpu-py312-torch2.11/`` plus prometheus-client, rich and pytest in a
carried ``.wheels/``; everything within one 10-minute command)::

    pip install -q --no-index --no-deps --target /tmp/site .wheels/*.whl \\
    && mkdir -p build/devpath && ln -sfn ../../api build/devpath/distgnn_api \\
    && ln -sfn ../../workload build/devpath/distgnn_workload \\
    && ln -sfn ../../operator build/devpath/distgnn_operator \\
    && PYTHONPATH=/tmp/site:$PWD/build/devpath NCCL_NVLS_ENABLE=0 \\
       python benchmarks/gpu_distributed/bench.py --pyg-baseline --budget 330 \\
         --repeats 3 --profile worker-1-bf16 --out results/dist.jsonl

The GPU tests run with the same set-up:
``python -m pytest -q -p no:cacheprovider --noconftest -m gpu tests/workload tests/e2e``.
``README.md`` beside this file has the exact command of the reported run and its results.

On CPU at small scale, as a smoke test::

    python benchmarks/gpu_distributed/bench.py --device cpu --nodes 20000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

from synthetic_gpu import PRODUCTS_NODES, PRODUCTS_UNDIRECTED_EDGES, generate  # noqa: E402

from distgnn_api import contract as c  # noqa: E402
from distgnn_api.spec import DistGNNJobSpec, parse_spec  # noqa: E402
from distgnn_operator.local.job_plan import JobPlan, plan_job, render_job  # noqa: E402
from distgnn_operator.local.launch_plan import LocalLayout  # noqa: E402
from distgnn_operator.local.supervisor import Supervisor  # noqa: E402
from distgnn_workload.data.graph import GraphData  # noqa: E402
from distgnn_workload.partition import PartitionStore, write_partitions  # noqa: E402

JOB_NAME = "bench"
ENV_RPC_CUDA = "DISTGNN_RPC_CUDA"
ENV_PROFILE_DIR = "DISTGNN_PROFILE_DIR"
STATS_FILE = "training_stats.json"
DEFAULT_RUNS = [
    "worker-1-bf16",
    "worker-2-bf16",
    "worker-1-fp32",
    "worker-2-fp32",
    "server-1-bf16",
    "server-2-bf16",
    "worker-2-bf16-0.2",
    "pyg",
    "server-1-fp32",
    "server-2-fp32",
    "worker-2-fp32-0.2",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--nodes", type=int, default=PRODUCTS_NODES)
    p.add_argument("--edges", type=int, default=None, help="undirected; default: products' density")
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--classes", type=int, default=47)
    p.add_argument("--train-fraction", type=float, default=0.08)
    p.add_argument("--eval-fraction", type=float, default=0.005, help="val and test each")
    p.add_argument(
        "--runs",
        nargs="+",
        default=DEFAULT_RUNS,
        help="runs in order, as mode-gpus-precision[-cacheRatio]; 'pyg' runs the baseline "
        "there (with --pyg-baseline); a short budget drops the last ones",
    )
    p.add_argument("--repeats", type=int, default=1, help="runs of each configuration")
    p.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
    p.add_argument(
        "--eval-every",
        type=int,
        default=1,
        help="evaluate every N epochs, as the examples do (0: only at the end)",
    )
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanout", type=int, nargs="+", default=[15, 10, 5])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--sampler-workers", type=int, default=4)
    p.add_argument(
        "--rpc-cuda",
        choices=["auto", "on", "off"],
        default="off",
        help="CUDA tensors over RPC (DISTGNN_RPC_CUDA); bulk data uses shared slots anyway",
    )
    p.add_argument("--run-timeout", type=float, default=120.0, help="past it a run is 'hung'")
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole script")
    p.add_argument("--pyg-baseline", action="store_true")
    p.add_argument("--pyg-timeout", type=float, default=130.0)
    p.add_argument("--profile", nargs="*", default=[], help="runs to profile, e.g. worker-1-bf16")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-dist-bench"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the work dir")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats: must be at least 1")
    if args.eval_every < 0:
        p.error("--eval-every: must be 0 or more")
    return args


def emit(out: Path | None, record: dict[str, Any]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        with open(out, "a") as f:
            f.write(line + "\n")


# --------------------------------------------------------------------------- data


def build_store(
    args: argparse.Namespace, store_dir: Path, partitions: int, key: str
) -> PartitionStore:
    """Generate the graph on the device and write a store of ``partitions`` random partitions."""
    dev = torch.device(args.device)
    edges = args.edges or round(args.nodes * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES)
    t0 = time.perf_counter()
    g = generate(
        args.nodes,
        edges,
        args.features,
        args.classes,
        device=dev,
        train_fraction=args.train_fraction,
    )
    n = g.num_nodes
    gen = torch.Generator(device=dev).manual_seed(1)
    train = torch.zeros(n, dtype=torch.bool, device=dev)
    train[g.train_idx] = True
    r = torch.rand(n, device=dev, generator=gen)
    val = ~train & (r < args.eval_fraction)
    test = ~train & (r >= 1.0 - args.eval_fraction)
    parts = torch.randint(0, partitions, (n,), device=dev, generator=gen)
    graph = GraphData(
        indptr=g.indptr.cpu().numpy(),
        indices=g.indices.cpu().numpy(),
        x=g.x.cpu().numpy(),
        y=g.y.cpu().numpy(),
        train_mask=train.cpu().numpy(),
        val_mask=val.cpu().numpy(),
        test_mask=test.cpu().numpy(),
        num_classes=args.classes,
        name="synthetic-products",
    )
    assignment = parts.to(torch.int32).cpu().numpy()
    del g, train, val, test, parts, r
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    gen_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    if store_dir.exists():
        shutil.rmtree(store_dir)
    store = write_partitions(store_dir, graph, partitions, assignment=assignment, key=key)
    emit(
        args.out,
        {
            "bench": "dist_data",
            "partitions": partitions,
            "nodes": n,
            "directed_edges": int(graph.num_edges),
            "train_nodes": int(graph.train_mask.sum()),
            "generate_s": round(gen_s, 2),
            "partition_write_s": round(time.perf_counter() - t1, 2),
            "edge_cut_fraction": store.meta.edge_cut_fraction,
        },
    )
    return store


# --------------------------------------------------------------------------- GPU monitor


class GpuMonitor:
    """Samples ``nvidia-smi`` while a run lasts: each GPU's utilisation (share of time a
    kernel ran) and which process holds a context on which GPU (a stray context on a
    peer's GPU makes the two processes time-slice that GPU)."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.util: dict[int, list[int]] = {}
        self.contexts: dict[int, set[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._uuids = dict(self._query("--query-gpu=uuid,index"))

    @staticmethod
    def _query(what: str) -> list[tuple[str, str]]:
        try:
            out = subprocess.run(
                ["nvidia-smi", what, "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line]
        return [(r[0], r[1]) for r in rows if len(r) >= 2]

    def start(self) -> GpuMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for index, util in self._query("--query-gpu=index,utilization.gpu"):
                if util.isdigit():
                    self.util.setdefault(int(index), []).append(int(util))
            for pid, gpu in self._query("--query-compute-apps=pid,gpu_uuid"):
                if pid.isdigit() and gpu in self._uuids:
                    self.contexts.setdefault(int(pid), set()).add(int(self._uuids[gpu]))

    def summary(self, pids: dict[int, str]) -> dict[str, Any]:
        busy = {str(i): [u for u in v if u > 0] for i, v in self.util.items()}
        return {
            "gpu_util_mean": {i: round(sum(v) / len(v), 1) for i, v in busy.items() if v},
            "gpu_contexts": {
                pids.get(pid, str(pid)): sorted(g) for pid, g in self.contexts.items()
            },
        }


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunConfig:
    mode: str
    gpus: int
    precision: str
    cache_ratio: float

    @property
    def name(self) -> str:
        return f"{self.mode}-{self.gpus}-{self.precision}"

    @property
    def full_name(self) -> str:
        return f"{self.name}-{self.cache_ratio:g}"


def num_partitions(runs: list[RunConfig]) -> int:
    """Partitions that every run's holders (one per GPU) divide into equal blocks."""
    return math.lcm(*(r.gpus for r in runs)) if runs else 1


def job_spec(
    cfg: RunConfig, args: argparse.Namespace, cuda: bool, partitions: int
) -> DistGNNJobSpec:
    server = cfg.mode == "server"
    return parse_spec(
        {
            "dataset": {
                "synthetic": {
                    "numNodes": args.nodes,
                    "numEdges": args.edges
                    or round(args.nodes * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES),
                    "numFeatures": args.features,
                    "numClasses": args.classes,
                }
            },
            "partition": {"algorithm": "random", "numPartitions": partitions},
            "samplers": {
                "replicas": cfg.gpus if server else 0,
                "gpusPerPod": 1 if server and cuda else 0,
                "workers": args.sampler_workers,
                "concurrency": args.concurrency,
                "cacheRatio": cfg.cache_ratio,
                "replicateTopology": "always",
            },
            "trainers": {
                "replicas": cfg.gpus,
                "gpusPerPod": 1 if cuda else 0,
                "prefetch": args.prefetch,
            },
            "model": {
                "arch": "sage",
                "hiddenChannels": args.hidden,
                "numLayers": len(args.fanout),
                "fanout": args.fanout,
                "dropout": 0.5,
            },
            "training": {
                "epochs": args.epochs,
                "batchSize": args.batch_size,
                "learningRate": 0.003,
                "evalEvery": args.eval_every,
                "checkpointEvery": args.epochs,
                "bf16": cfg.precision == "bf16",
            },
        }
    )


def plan(
    cfg: RunConfig,
    args: argparse.Namespace,
    partitions: int,
    root: Path,
    *,
    rpc_cuda: bool,
    profile: bool,
) -> JobPlan:
    """The run's processes, as ``distgnn run`` would start them (the partition is on disk)."""
    cuda = args.device == "cuda"
    spec = job_spec(cfg, args, cuda, partitions)
    uid = uuid.uuid4().hex
    layout = LocalLayout(
        job_name=JOB_NAME,
        namespace="local",
        data_dir=args.work_dir / "data",
        run_dir=root,
        gpus=tuple(str(i) for i in range(torch.cuda.device_count())) if cuda else (),
    )
    rendered = render_job(JOB_NAME, uid, spec, partition_reused=True)
    extra = {ENV_RPC_CUDA: "1" if rpc_cuda else "0"}
    if profile:
        extra[ENV_PROFILE_DIR] = str(root / "profile")
    job = plan_job(layout, rendered, threads=None if cuda else 1)
    workload = [s.with_contract(rendezvous_timeout_s=120.0, extra=extra) for s in job.workload]
    return JobPlan(planner=job.planner, partition=(), workload=workload)


def _log_tail(path: Path, lines: int = 25) -> str:
    text = path.read_text(errors="replace").splitlines() if path.exists() else []
    keep = [t for t in text if "Warning" not in t and "warn(" not in t][-lines:]
    return "\n".join(keep)


def stacks(sup: Supervisor, names: list[str], logs: dict[str, Path]) -> dict[str, str]:
    """The stacks of every process still running: ``py-spy dump`` (when on PATH), then the
    workload's faulthandler (SIGUSR1 writes every thread's stack to the process's log)."""
    out: dict[str, str] = {}
    py_spy = shutil.which("py-spy")
    for name in names:
        parts = []
        if py_spy:
            try:
                proc = subprocess.run(
                    [py_spy, "dump", "--pid", str(sup.pid(name))],
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                parts.append("py-spy dump:\n" + (proc.stdout + proc.stderr).strip())
            except (OSError, subprocess.TimeoutExpired) as err:
                parts.append(f"py-spy dump failed: {err}")
        log = logs[name]
        offset = log.stat().st_size if log.exists() else 0
        try:
            os.kill(sup.pid(name), signal.SIGUSR1)
        except ProcessLookupError:
            parts.append("exited before its stack could be read")
            out[name] = "\n".join(parts)
            continue
        time.sleep(1.5)
        with open(log, "rb") as f:
            f.seek(offset)
            dumped = f.read().decode(errors="replace").strip()
        parts.append("faulthandler (SIGUSR1):\n" + (dumped or "(nothing written)"))
        out[name] = "\n".join(parts)
    return out


def run_one(
    cfg: RunConfig,
    args: argparse.Namespace,
    partitions: int,
    *,
    repeat: int,
    rpc_cuda: bool,
    timeout: float,
) -> dict[str, Any]:
    root = args.work_dir / "runs" / f"{cfg.full_name}-{'cuda' if rpc_cuda else 'host'}-rpc-{repeat}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    profile = repeat == 0 and (
        cfg.full_name in args.profile or (cfg.cache_ratio == 1.0 and cfg.name in args.profile)
    )
    job = plan(cfg, args, partitions, root, rpc_cuda=rpc_cuda, profile=profile)
    names = [s.name for s in job.workload]
    logs = {s.name: s.log_path for s in job.workload}
    t0 = time.perf_counter()
    monitor = GpuMonitor().start() if args.device == "cuda" else None
    sup = Supervisor(grace_period_s=5)
    status = "hung"
    stuck: dict[str, str] = {}
    try:
        for spec in job.workload:
            sup.start(spec)
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            codes = {name: sup.poll(name) for name in names}
            if any(code not in (None, 0) for code in codes.values()):
                status = "failed"
                break
            if all(code == 0 for code in codes.values()):
                status = "ok"
                break
            time.sleep(0.2)
        if status == "hung":
            stuck = stacks(sup, [n for n in names if sup.poll(n) is None], logs)
    finally:
        if monitor is not None:
            monitor.stop()
        pids = {sup.pid(name): name for name in names}
        sup.stop()
    codes = {name: sup.poll(name) for name in names}
    wall = time.perf_counter() - t0
    record: dict[str, Any] = {
        "bench": "dist_run",
        "run": cfg.name,
        "mode": cfg.mode,
        "gpus": cfg.gpus,
        "precision": cfg.precision,
        "cache_ratio": cfg.cache_ratio,
        "repeat": repeat,
        "rpc_cuda": rpc_cuda,
        "eval_every": args.eval_every,
        "status": status,
        "wall_s": round(wall, 1),
    }
    if monitor is not None:
        record.update(monitor.summary(pids))
    texts = {name: path.read_text(errors="replace") for name, path in logs.items() if path.exists()}
    fallbacks = [name for name, text in texts.items() if "falling back" in text]
    if fallbacks:
        record["sampler_graph_fallback"] = fallbacks
    trainer0 = texts.get("trainer-0", "")
    if "training step captured in a CUDA graph" in trainer0:
        record["step"] = "cuda graph"
    elif "CUDA graph capture of the training step failed" in trainer0:
        record["step"] = "eager (capture failed)"
    else:
        record["step"] = "eager"
    record["shared_slots_mapped"] = sum(text.count("mapped ") for text in texts.values())
    stats_path = root / STATS_FILE
    if status != "ok" or not stats_path.exists():
        if status == "ok":
            record["status"] = "failed"
        record["error"] = f"exit codes {codes}" + (
            f" (still running after {timeout:.0f}s: {sorted(stuck)})" if status == "hung" else ""
        )
        if stuck:
            record["stacks"] = stuck
        record["log_tail"] = {name: _log_tail(path) for name, path in logs.items()}
        return record
    epochs = json.loads(stats_path.read_text())["epochs"]
    measured = epochs[1:] if len(epochs) > 1 else epochs
    seconds = sum(e["seconds"] for e in measured)
    seeds = sum(e["seeds"] for e in measured)
    edges = sum(e["edges"] for e in measured)
    result = json.loads((root / c.RESULT_FILE).read_text())
    record.update(
        {
            "epochs_measured": len(measured),
            "epoch_s": round(seconds / len(measured), 3),
            "seeds_per_s": round(seeds / seconds, 1),
            "seeds_per_s_per_gpu": round(seeds / seconds / cfg.gpus, 1),
            "sampled_edges_per_s": round(edges / seconds, 1),
            "data_wait_share": round(sum(e["data_wait_seconds"] for e in measured) / seconds, 4),
            "host_wait_share": round(sum(e["host_wait_seconds"] for e in measured) / seconds, 4),
            "warmup_epoch_s": round(epochs[0]["seconds"], 3) if len(epochs) > 1 else None,
            "fastest_rank_share": round(
                sum(e.get("fastest_rank_seconds") or e["seconds"] for e in measured) / seconds, 4
            ),
            "final_loss": round(epochs[-1]["loss"], 4),
            "test_accuracy": round(result["testAccuracy"], 4),
        }
    )
    table = root / "profile" / "profile-trainer-0.txt"
    if table.exists() and args.out is not None:
        target = args.out.parent / f"profile-{cfg.full_name}.txt"
        shutil.copyfile(table, target)
        record["profile"] = target.name
        trace = root / "profile" / "trace-trainer-0.json.gz"
        if trace.exists():
            shutil.copyfile(trace, args.out.parent / f"trace-{cfg.full_name}.json.gz")
    return record


# --------------------------------------------------------------------------- main


def parse_run(token: str) -> RunConfig:
    """``mode-gpus-precision[-cacheRatio]``, e.g. ``worker-2-bf16-0.2``."""
    parts = token.split("-")
    if (
        len(parts) not in (3, 4)
        or parts[0] not in ("worker", "server")
        or not parts[1].isdigit()
        or int(parts[1]) < 1
        or parts[2] not in ("fp32", "bf16")
    ):
        raise SystemExit(
            f"--runs: {token!r} is not mode-gpus-precision[-cacheRatio], "
            "e.g. worker-2-bf16 or server-4-fp32-0.2"
        )
    ratio = float(parts[3]) if len(parts) == 4 else 1.0
    return RunConfig(parts[0], int(parts[1]), parts[2], ratio)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (KINDS.md)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = [t if t == "pyg" else parse_run(t) for t in args.runs]
    if args.device == "cpu":  # bf16 needs a GPU
        runs = [r for r in runs if isinstance(r, str) or r.precision == "fp32"]
    configs = [r for r in runs if isinstance(r, RunConfig)]
    gpus = max((r.gpus for r in configs), default=1)
    if args.device == "cuda" and torch.cuda.device_count() < gpus:
        print(f"need {gpus} GPUs, have {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    partitions = num_partitions(configs)
    emit(
        args.out,
        {
            "bench": "dist_env",
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
            "gpus_visible": torch.cuda.device_count() if args.device == "cuda" else 0,
            "cpus": os.cpu_count(),
            "fanout": args.fanout,
            "batch_size": args.batch_size,
            "hidden": args.hidden,
            "epochs": args.epochs,
            "eval_every": args.eval_every,
            "repeats": args.repeats,
            "partitions": partitions,
        },
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if configs:
        spec = job_spec(configs[0], args, args.device == "cuda", partitions)
        key = c.partition_key(spec)
        build_store(args, c.partition_dir(args.work_dir / "data", key), partitions, key)
    rpc_modes = {"on": [True], "off": [False], "auto": [args.device == "cuda", False]}
    choices = list(dict.fromkeys(rpc_modes[args.rpc_cuda]))
    records: list[dict[str, Any]] = []
    pyg: float | None = None
    pyg_done = False
    if args.pyg_baseline and "pyg" not in runs:
        runs.append("pyg")
    for run in runs:
        if isinstance(run, str):
            if args.pyg_baseline and not pyg_done:
                pyg, pyg_done = pyg_baseline(args, started), True
            continue
        for repeat in range(args.repeats):
            for attempt, rpc_cuda in enumerate(choices):
                left = args.budget - (time.perf_counter() - started)
                if left < 40:
                    emit(
                        args.out,
                        {
                            "bench": "dist_run",
                            "run": run.full_name,
                            "repeat": repeat,
                            "skipped": "budget",
                        },
                    )
                    break
                record = run_one(
                    run,
                    args,
                    partitions,
                    repeat=repeat,
                    rpc_cuda=rpc_cuda,
                    timeout=min(args.run_timeout, left),
                )
                retry = record["status"] == "failed" and attempt + 1 < len(choices)
                if retry:
                    record["retry"] = "with host tensors over RPC"
                emit(args.out, record)
                if not retry:
                    records.append(record)
                    if record["status"] == "ok" and attempt > 0:
                        # CUDA tensors over RPC failed here: later runs use host tensors.
                        choices = choices[attempt:]
                    break
    summaries = summarise(args, records)
    if pyg is not None:
        compare(args, summaries, pyg)
    table(summaries)
    if not args.keep:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    return 0


def summarise(args: argparse.Namespace, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: the median and spread of seeds/s per GPU over its repeats, and its
    hangs and failures; then the scaling from 1 GPU (medians of this call only)."""
    groups: dict[tuple[str, int, str, float], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["mode"], r["gpus"], r["precision"], r["cache_ratio"]), []).append(r)
    summaries = []
    for (mode, gpus, precision, ratio), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        per_gpu = [r["seeds_per_s_per_gpu"] for r in ok]
        summary: dict[str, Any] = {
            "bench": "dist_summary",
            "run": f"{mode}-{gpus}-{precision}",
            "mode": mode,
            "gpus": gpus,
            "precision": precision,
            "cache_ratio": ratio,
            "repeats": len(rs),
            "ok": len(ok),
            "hung": sum(r["status"] == "hung" for r in rs),
            "failed": sum(r["status"] == "failed" for r in rs),
        }
        if ok:
            summary.update(
                {
                    "seeds_per_s_per_gpu_median": round(statistics.median(per_gpu), 1),
                    "seeds_per_s_per_gpu_min": min(per_gpu),
                    "seeds_per_s_per_gpu_max": max(per_gpu),
                    "seeds_per_s_median": round(statistics.median(r["seeds_per_s"] for r in ok), 1),
                    "data_wait_share_median": statistics.median(r["data_wait_share"] for r in ok),
                    "host_wait_share_median": statistics.median(r["host_wait_share"] for r in ok),
                    "test_accuracy_median": statistics.median(r["test_accuracy"] for r in ok),
                }
            )
        emit(args.out, summary)
        summaries.append(summary)
    by_key = {
        (s["mode"], s["gpus"], s["precision"], s["cache_ratio"]): s
        for s in summaries
        if "seeds_per_s_median" in s
    }
    for (mode, gpus, precision, ratio), many in by_key.items():
        one = by_key.get((mode, 1, precision, ratio))
        if gpus > 1 and one is not None:
            emit(
                args.out,
                {
                    "bench": "dist_scaling",
                    "mode": mode,
                    "precision": precision,
                    "cache_ratio": ratio,
                    "gpus": gpus,
                    "seeds_per_s_1gpu_median": one["seeds_per_s_median"],
                    "seeds_per_s_median": many["seeds_per_s_median"],
                    "speedup": round(many["seeds_per_s_median"] / one["seeds_per_s_median"], 3),
                },
            )
    return summaries


def table(summaries: list[dict[str, Any]]) -> None:
    """A human-readable summary: median [min-max] seeds/s per GPU of each configuration."""
    print(
        f"{'run':<18}{'cache':>6}{'ok/runs':>9}{'hung':>6}{'seeds/s/GPU median':>20}"
        f"{'min-max':>22}{'data wait':>11}{'host wait':>11}{'test acc':>10}"
    )
    for s in summaries:
        line = f"{s['run']:<18}{s['cache_ratio']:>6g}{s['ok']:>5}/{s['repeats']:<3}{s['hung']:>6}"
        if "seeds_per_s_per_gpu_median" in s:
            spread = f"{s['seeds_per_s_per_gpu_min']:,.0f}-{s['seeds_per_s_per_gpu_max']:,.0f}"
            line += (
                f"{s['seeds_per_s_per_gpu_median']:>20,.0f}{spread:>22}"
                f"{s['data_wait_share_median']:>11.1%}{s['host_wait_share_median']:>11.1%}"
                f"{s['test_accuracy_median']:>10.3f}"
            )
        print(line)


def pyg_baseline(args: argparse.Namespace, started: float) -> float | None:
    """PyG's NeighborLoader + GraphSAGE on the same graph: its seeds/s, or None."""
    left = args.budget - (time.perf_counter() - started)
    if left < 30:
        emit(args.out, {"bench": "pyg_train", "skipped": "time budget"})
        return None
    out = args.work_dir / "pyg.jsonl"
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "gpu" / "pyg_baseline.py"),
        "--device",
        args.device,
        "--nodes",
        str(args.nodes),
        "--workers",
        "12",
        "--out",
        str(out),
    ]
    if args.edges:
        cmd += ["--edges", str(args.edges)]
    try:
        proc = subprocess.run(
            cmd, timeout=min(args.pyg_timeout, left), capture_output=True, text=True
        )
        failed = proc.returncode != 0
        tail = (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        failed, tail = True, "timeout"
    records = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    for rec in records:
        emit(args.out, rec)
    train = next((r for r in records if r.get("bench") == "pyg_train"), None)
    if train is None:
        emit(args.out, {"bench": "pyg_train", "error": tail if failed else "no result"})
        return None
    return float(train["seeds_per_s"])


def compare(args: argparse.Namespace, summaries: list[dict[str, Any]], base: float) -> None:
    """Each configuration's median seeds/s per GPU over the PyG baseline's (same call)."""
    for s in summaries:
        if "seeds_per_s_per_gpu_median" not in s:
            continue
        emit(
            args.out,
            {
                "bench": "dist_vs_pyg",
                "run": s["run"],
                "cache_ratio": s["cache_ratio"],
                "seeds_per_s_per_gpu_median": s["seeds_per_s_per_gpu_median"],
                "pyg_seeds_per_s": round(base, 1),
                "times_pyg_per_gpu": round(s["seeds_per_s_per_gpu_median"] / base, 2),
            },
        )


if __name__ == "__main__":
    sys.exit(main())
