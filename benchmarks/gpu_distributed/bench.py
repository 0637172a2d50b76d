"""Distributed training throughput: the real entry points, as local processes, on 1 and 2 GPUs.

Generates the products-scale synthetic graph on the GPU (``benchmarks/gpu/synthetic_gpu.py``),
writes one partition store with 2 random partitions (reused by every run), then runs
``python -m distgnn_workload.sampler|trainer`` with the contract's environment, one process
per GPU with NCCL, for each run of ``--runs`` (``mode-gpus-precision[-cacheRatio]``):

- worker mode (trainers sample their own partition; features of the other partition come
  from the hot-feature cache, the rest from the peer through shared slots) and
  server-client mode (sampler processes on the same GPUs write feature-complete mini-batches
  into shared slots of the trainers; RPC carries requests and sizes);
- 1 GPU and 2 GPUs (one trainer pod per GPU);
- fp32 and bf16 (autocast, bf16 features); cacheRatio 1 unless given.

Each run trains ``--epochs`` epochs (3-layer GraphSAGE, hidden 256, fanout 15/10/5, batch
1024 per GPU); the first is warm-up. From the trainers' ``training_stats.json`` it reports,
as JSON lines: seeds/s per GPU, sampled edges/s, and the data-wait share (how long the
training stream stalled for data, over the epoch time; the host-side wait is reported
too), with the GPUs' utilisation and which process holds a context on which GPU
(``nvidia-smi``), whether the training step ran as a CUDA graph and how many shared slots
were mapped. Then the 1 -> 2 GPU scaling and, with ``--pyg-baseline``, the PyG
``NeighborLoader`` baseline (``benchmarks/gpu/pyg_baseline.py``) on the same graph (at the
``pyg`` place of ``--runs``) and the ratios to it. ``--profile RUN...`` writes a
torch.profiler table and a chrome trace of trainer 0's steps 20-40 of its first epoch.

On the device machine with 2 GPUs (the repository copied there, the wheels of
``../shared/wheels/gpu-py312-torch2.11/`` plus prometheus-client and pytest in a carried
``.wheels/``; everything within one 10-minute command)::

    pip install -q --no-index --no-deps --target /tmp/site .wheels/*.whl \\
    && mkdir -p build/devpath && ln -sfn ../../api build/devpath/distgnn_api \\
    && ln -sfn ../../workload build/devpath/distgnn_workload \\
    && PYTHONPATH=/tmp/site:$PWD/build/devpath NCCL_NVLS_ENABLE=0 \\
       python benchmarks/gpu_distributed/bench.py --pyg-baseline --budget 330 \\
         --profile worker-1-bf16 --out results/dist.jsonl

The GPU tests run with the same set-up:
``python -m pytest -q -p no:cacheprovider --noconftest -m gpu tests/workload tests/e2e``.
``README.md`` beside this file has the exact command of the reported run and its results.

On CPU at small scale, as a smoke test::

    python benchmarks/gpu_distributed/bench.py --device cpu --nodes 20000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
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
from distgnn_workload.data.graph import GraphData  # noqa: E402
from distgnn_workload.partition import PartitionStore, write_partitions  # noqa: E402

NUM_PARTITIONS = 2
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
    p.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
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
    p.add_argument("--run-timeout", type=float, default=120.0)
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole script")
    p.add_argument("--pyg-baseline", action="store_true")
    p.add_argument("--pyg-timeout", type=float, default=130.0)
    p.add_argument("--profile", nargs="*", default=[], help="runs to profile, e.g. worker-1-bf16")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-dist-bench"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the work dir")
    return p.parse_args(argv)


def emit(out: Path | None, record: dict[str, Any]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        with open(out, "a") as f:
            f.write(line + "\n")


# --------------------------------------------------------------------------- data


def build_store(args: argparse.Namespace, store_dir: Path) -> PartitionStore:
    """Generate the graph on the device and write a 2-partition store (random assignment)."""
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
    parts = torch.randint(0, NUM_PARTITIONS, (n,), device=dev, generator=gen)
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
    store = write_partitions(store_dir, graph, NUM_PARTITIONS, assignment=assignment, key="bench")
    emit(
        args.out,
        {
            "bench": "dist_data",
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


def job_spec(cfg: RunConfig, args: argparse.Namespace, cuda: bool) -> DistGNNJobSpec:
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
            "partition": {"algorithm": "random", "numPartitions": NUM_PARTITIONS},
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
                "evalEvery": 0,
                "checkpointEvery": args.epochs,
                "bf16": cfg.precision == "bf16",
            },
        }
    )


def free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [int(s.getsockname()[1]) for s in socks]
    for s in socks:
        s.close()
    return ports


def launch(
    cfg: RunConfig,
    args: argparse.Namespace,
    store_dir: Path,
    root: Path,
    *,
    rpc_cuda: bool,
    profile: bool,
) -> tuple[list[tuple[str, subprocess.Popen[bytes]]], Path]:
    cuda = args.device == "cuda"
    spec = job_spec(cfg, args, cuda)
    uid = uuid.uuid4().hex
    run_dir = root / "run"
    run_dir.mkdir(parents=True)
    config = root / c.CONFIG_FILE_NAME
    config.write_text(c.job_config_json("bench", "default", uid, spec))
    samplers = spec.samplers.replicas
    ports = free_ports(2 * (cfg.gpus + samplers) + 1)
    trainer_addrs = ",".join(f"127.0.0.1:{p}" for p in ports[: cfg.gpus])
    sampler_addrs = ",".join(f"127.0.0.1:{p}" for p in ports[cfg.gpus : cfg.gpus + samplers])
    ddp_port = ports[cfg.gpus + samplers]
    metrics = iter(ports[cfg.gpus + samplers + 1 :])
    base = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
    base.update(
        {
            c.ENV_NUM_TRAINERS: str(cfg.gpus),
            c.ENV_NUM_SAMPLERS: str(samplers),
            c.ENV_PROCS_PER_POD: "1",
            c.ENV_TRAINER_ADDRS: trainer_addrs,
            c.ENV_SAMPLER_ADDRS: sampler_addrs,
            c.ENV_DDP_PORT: str(ddp_port),
            c.ENV_DATA_DIR: str(root),
            c.ENV_PARTITION_DIR: str(store_dir),
            c.ENV_RUN_DIR: str(run_dir),
            c.ENV_CONFIG: str(config),
            c.ENV_JOB_NAME: "bench",
            c.ENV_JOB_UID: uid,
            c.ENV_NAMESPACE: "default",
            c.ENV_RENDEZVOUS_TIMEOUT: "120",
            ENV_RPC_CUDA: "1" if rpc_cuda else "0",
            "PYTHONUNBUFFERED": "1",
            "GLOO_SOCKET_IFNAME": "lo",
            "TP_SOCKET_IFNAME": "lo",
            "NCCL_SOCKET_IFNAME": "lo",
            "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
        }
    )
    if args.device == "cpu":
        base.setdefault("OMP_NUM_THREADS", "1")
    if profile:
        base[ENV_PROFILE_DIR] = str(root / "profile")
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    roles = [(c.Role.sampler, r) for r in range(samplers)]
    roles += [(c.Role.trainer, r) for r in range(cfg.gpus)]
    for role, rank in roles:
        env = dict(base)
        env[c.ENV_ROLE] = role.value
        env[c.ENV_RANK] = str(rank)
        env[c.ENV_METRICS_PORT] = str(next(metrics))
        env[c.ENV_DEVICE] = f"cuda:{rank}" if cuda else "cpu"
        name = f"{role.value}-{rank}"
        log = open(root / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child
        proc = subprocess.Popen(
            [sys.executable, "-m", c.role_module(role)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        log.close()
        procs.append((name, proc))
    return procs, run_dir


def _tail(root: Path, lines: int = 25) -> str:
    out = []
    for path in sorted(root.glob("*.log")):
        text = path.read_text(errors="replace").splitlines()
        keep = [t for t in text if "Warning" not in t and "warn(" not in t][-lines:]
        out.append(f"--- {path.name}\n" + "\n".join(keep))
    return "\n".join(out)


def run_one(
    cfg: RunConfig,
    args: argparse.Namespace,
    store_dir: Path,
    *,
    rpc_cuda: bool,
    timeout: float,
) -> dict[str, Any]:
    root = args.work_dir / f"run-{cfg.full_name}-{'cuda' if rpc_cuda else 'host'}-rpc"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    profile = cfg.full_name in args.profile or (cfg.cache_ratio == 1.0 and cfg.name in args.profile)
    t0 = time.perf_counter()
    monitor = GpuMonitor().start() if args.device == "cuda" else None
    procs, run_dir = launch(cfg, args, store_dir, root, rpc_cuda=rpc_cuda, profile=profile)
    deadline = t0 + timeout
    codes: dict[str, int | None] = {}
    try:
        while time.perf_counter() < deadline:
            codes = {name: p.poll() for name, p in procs}
            if any(code not in (None, 0) for code in codes.values()):
                break
            if all(code == 0 for code in codes.values()):
                break
            time.sleep(0.2)
    finally:
        if monitor is not None:
            monitor.stop()
        for _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        codes = {name: p.returncode for name, p in procs}
    wall = time.perf_counter() - t0
    record: dict[str, Any] = {
        "bench": "dist_run",
        "run": cfg.name,
        "mode": cfg.mode,
        "gpus": cfg.gpus,
        "precision": cfg.precision,
        "cache_ratio": cfg.cache_ratio,
        "rpc_cuda": rpc_cuda,
        "wall_s": round(wall, 1),
    }
    if monitor is not None:
        record.update(monitor.summary({p.pid: name for name, p in procs}))
    logs = {path.stem: path.read_text(errors="replace") for path in root.glob("*.log")}
    fallbacks = [name for name, text in logs.items() if "falling back" in text]
    if fallbacks:
        record["sampler_graph_fallback"] = fallbacks
    trainer0 = logs.get("trainer-0", "")
    if "training step captured in a CUDA graph" in trainer0:
        record["step"] = "cuda graph"
    elif "CUDA graph capture of the training step failed" in trainer0:
        record["step"] = "eager (capture failed)"
    else:
        record["step"] = "eager"
    record["shared_slots_mapped"] = sum(text.count("mapped ") for text in logs.values())
    stats_path = run_dir / STATS_FILE
    if not stats_path.exists() or any(code != 0 for code in codes.values()):
        record["error"] = f"exit codes {codes}" + (" (timeout)" if wall >= timeout else "")
        record["log_tail"] = _tail(root)
        return record
    epochs = json.loads(stats_path.read_text())["epochs"]
    measured = epochs[1:] if len(epochs) > 1 else epochs
    seconds = sum(e["seconds"] for e in measured)
    seeds = sum(e["seeds"] for e in measured)
    edges = sum(e["edges"] for e in measured)
    result = json.loads((run_dir / c.RESULT_FILE).read_text())
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
    if len(parts) not in (3, 4) or parts[0] not in ("worker", "server"):
        raise SystemExit(f"--runs: {token!r} is not mode-gpus-precision[-cacheRatio]")
    ratio = float(parts[3]) if len(parts) == 4 else 1.0
    return RunConfig(parts[0], int(parts[1]), parts[2], ratio)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = [t if t == "pyg" else parse_run(t) for t in args.runs]
    if args.device == "cpu":  # bf16 needs a GPU
        runs = [r for r in runs if isinstance(r, str) or r.precision == "fp32"]
    gpus = max((r.gpus for r in runs if isinstance(r, RunConfig)), default=1)
    if args.device == "cuda" and torch.cuda.device_count() < gpus:
        print(f"need {gpus} GPUs, have {torch.cuda.device_count()}", file=sys.stderr)
        return 2
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
        },
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    store_dir = args.work_dir / "store"
    build_store(args, store_dir)
    rpc_modes = {"on": [True], "off": [False], "auto": [args.device == "cuda", False]}
    choices = list(dict.fromkeys(rpc_modes[args.rpc_cuda]))
    results: list[dict[str, Any]] = []
    pyg: float | None = None
    pyg_done = False
    if args.pyg_baseline and "pyg" not in runs:
        runs.append("pyg")
    for run in runs:
        if isinstance(run, str):
            if args.pyg_baseline and not pyg_done:
                pyg, pyg_done = pyg_baseline(args, started), True
            continue
        for attempt, rpc_cuda in enumerate(choices):
            left = args.budget - (time.perf_counter() - started)
            if left < 40:
                emit(args.out, {"bench": "dist_run", "run": run.full_name, "skipped": "budget"})
                break
            record = run_one(
                run, args, store_dir, rpc_cuda=rpc_cuda, timeout=min(args.run_timeout, left)
            )
            retry = "error" in record and attempt + 1 < len(choices)
            if retry:
                record["retry"] = "with host tensors over RPC"
            emit(args.out, record)
            if "error" not in record:
                results.append(record)
                if attempt > 0:
                    # CUDA tensors over RPC failed here: later runs go straight to host tensors.
                    choices = choices[attempt:]
                break
    summarise(args, results)
    if pyg is not None:
        compare(args, results, pyg)
    table(results)
    if not args.keep:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    return 0


def table(results: list[dict[str, Any]]) -> None:
    """A human-readable summary of the runs that completed."""
    print(
        f"{'run':<22}{'cache':>6}{'rpc':>6}{'seeds/s/GPU':>13}{'edges/s':>12}"
        f"{'data wait':>11}{'host wait':>11}{'test acc':>10}"
    )
    for r in results:
        print(
            f"{r['run']:<22}{r['cache_ratio']:>6g}{'cuda' if r['rpc_cuda'] else 'host':>6}"
            f"{r['seeds_per_s_per_gpu']:>13,.0f}{r['sampled_edges_per_s']:>12.3g}"
            f"{r['data_wait_share']:>11.1%}{r['host_wait_share']:>11.1%}"
            f"{r['test_accuracy']:>10.3f}"
        )


def summarise(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    main_runs = {
        (r["mode"], r["gpus"], r["precision"]): r for r in results if r["cache_ratio"] == 1.0
    }
    for (mode, gpus, precision), two in main_runs.items():
        one = main_runs.get((mode, 1, precision))
        if gpus == 2 and one is not None:
            emit(
                args.out,
                {
                    "bench": "dist_scaling",
                    "mode": mode,
                    "precision": precision,
                    "seeds_per_s_1gpu": one["seeds_per_s"],
                    "seeds_per_s_2gpu": two["seeds_per_s"],
                    "speedup": round(two["seeds_per_s"] / one["seeds_per_s"], 3),
                },
            )


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


def compare(args: argparse.Namespace, results: list[dict[str, Any]], base: float) -> None:
    """Each run's seeds/s per GPU over the PyG baseline's."""
    for r in results:
        emit(
            args.out,
            {
                "bench": "dist_vs_pyg",
                "run": r["run"],
                "cache_ratio": r["cache_ratio"],
                "seeds_per_s_per_gpu": r["seeds_per_s_per_gpu"],
                "pyg_seeds_per_s": round(base, 1),
                "times_pyg_per_gpu": round(r["seeds_per_s_per_gpu"] / base, 2),
            },
        )


if __name__ == "__main__":
    sys.exit(main())
