"""Load benchmark of the operator: many DistGNNJobs applied at once.

It runs ``python -m distgnn_operator`` as its own process against a control plane (the test
fixture's, started here, or the cluster of ``--kubeconfig``), applies N jobs in one
``kubectl apply``, and reports:

- the seconds until every job is in Training (and until every trainer pod is Running);
- p50 and p99 reconcile latency, interpolated from the operator's
  ``distgnn_operator_reconcile_seconds`` histogram as Prometheus' histogram_quantile does;
- the operator's resident memory (current and peak).

Usage::

    python benchmarks/operator_load.py --jobs 50
    python benchmarks/operator_load.py --kubeconfig ~/.kube/config --namespace load --jobs 50
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# For tests.support; appended, so that the folder operator/ never shadows the stdlib module.
sys.path.append(str(REPO))

from distgnn_operator import crd  # noqa: E402
from distgnn_operator.local.ports import free_ports  # noqa: E402

HISTOGRAM = "distgnn_operator_reconcile_seconds"


class Kubectl:
    """kubectl with one kubeconfig."""

    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> str:
        result = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def items(self, *args: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self("get", *args, "-o", "json"))["items"]
        return items


@contextmanager
def control_plane(kubeconfig: str | None) -> Iterator[tuple[Kubectl, Any]]:
    """The given cluster, or a fresh test control plane (stopped afterwards)."""
    if kubeconfig:
        yield Kubectl("kubectl", Path(kubeconfig)), None
        return
    from tests.support.controlplane import ControlPlane
    from tests.support.controlplane_binaries import ensure_binaries

    bin_dir = ensure_binaries()
    plane = ControlPlane.start(bin_dir)
    try:
        yield Kubectl(str(bin_dir / "kubectl"), plane.kubeconfig), plane
    finally:
        plane.stop()


def manifests(count: int, claim: str) -> str:
    """N small CPU jobs on one claim, each with its own dataset seed (so each partitions)."""
    docs = []
    for i in range(count):
        docs.append(
            {
                "apiVersion": "distgnn.io/v1alpha1",
                "kind": "DistGNNJob",
                "metadata": {"name": f"load-{i:03d}"},
                "spec": {
                    "dataset": {"synthetic": {"numNodes": 10000, "numEdges": 50000, "seed": i}},
                    "samplers": {"replicas": 2},
                    "trainers": {"replicas": 2, "gpusPerPod": 0},
                    "storage": {"claimName": claim},
                },
            }
        )
    return "\n---\n".join(json.dumps(d) for d in docs)


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def scrape_histogram(port: int) -> tuple[list[tuple[float, float]], float, float]:
    """Cumulative buckets (upper bound, count), total count and sum of the reconcile histogram."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    buckets: list[tuple[float, float]] = []
    count = total = 0.0
    for line in text.splitlines():
        if line.startswith(f"{HISTOGRAM}_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append(
                (float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1]))
            )
        elif line.startswith(f"{HISTOGRAM}_count"):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith(f"{HISTOGRAM}_sum"):
            total = float(line.rsplit(" ", 1)[1])
    return sorted(buckets), count, total


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank q."""
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if bound == float("inf"):
                return lower_bound
            width = cumulative - lower_count
            return lower_bound + (bound - lower_bound) * (
                (rank - lower_count) / width if width else 0.0
            )
        lower_bound, lower_count = bound, cumulative
    return lower_bound


def wait(what: str, probe: Any, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if probe():
            return time.monotonic() - start
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with control_plane(args.kubeconfig) as (kubectl, plane):
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / crd.CRD_PATH))
        kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd.CRD_NAME}")
        ns = args.namespace
        kubectl("create", "namespace", ns, check=False)
        claim = "load-data"
        if plane is not None:
            plane.create_pv(f"{ns}-{claim}", size="100Gi", claim=(ns, claim))
        kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim},
                    "spec": {
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": args.storage_class,
                        "resources": {"requests": {"storage": "100Gi"}},
                    },
                }
            ),
        )

        (metrics_port,) = free_ports(1)
        env = {
            **os.environ,
            "KUBECONFIG": str(kubectl.kubeconfig),
            "DISTGNN_OPERATOR_KUBECONFIG": str(kubectl.kubeconfig),
            "DISTGNN_OPERATOR_NAMESPACES": ns,
            "DISTGNN_OPERATOR_PEERING": "",
            "DISTGNN_OPERATOR_METRICS_PORT": str(metrics_port),
            "DISTGNN_OPERATOR_HEALTH_PORT": "0",
            "DISTGNN_OPERATOR_LOG_LEVEL": "WARNING",
        }
        log_path = Path(tempfile.mkdtemp(prefix="distgnn-load-")) / "operator.log"
        log = log_path.open("w")
        operator = subprocess.Popen(
            [sys.executable, "-m", "distgnn_operator"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait("the operator's metrics endpoint", lambda: _reachable(metrics_port), 60)
            time.sleep(2)  # let the watches start
            idle_rss, _ = rss_kib(operator.pid)
            peak = idle_rss

            started = time.monotonic()
            kubectl("apply", "-n", ns, "-f", "-", input=manifests(args.jobs, claim))

            def all_in(phase: str) -> bool:
                nonlocal peak
                peak = max(peak, rss_kib(operator.pid)[0])
                jobs = kubectl.items("dgj", "-n", ns)
                return len(jobs) == int(args.jobs) and all(
                    (j.get("status") or {}).get("phase") == phase for j in jobs
                )

            def trainers_running() -> bool:
                pods = kubectl.items("pods", "-n", ns, "-l", "distgnn.io/role=trainer")
                running = [p for p in pods if p["status"].get("phase") == "Running"]
                return len(running) == 2 * int(args.jobs)

            to_training = wait("all jobs in Training", lambda: all_in("Training"), args.timeout)
            to_running = to_training + wait(
                "all trainer pods Running", trainers_running, args.timeout
            )
            time.sleep(args.settle)
            rss, hwm = rss_kib(operator.pid)
            buckets, count, total = scrape_histogram(metrics_port)
            statefulsets = kubectl.items("statefulsets", "-n", ns)
            partition_jobs = kubectl.items("jobs", "-n", ns)
        finally:
            operator.terminate()
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                operator.kill()
            log.close()
        return {
            "jobs": args.jobs,
            "control_plane": "test fixture (kwok nodes)"
            if plane is not None
            else str(args.kubeconfig),
            "seconds_until_all_training": round(to_training, 2),
            "seconds_until_all_trainers_running": round(to_running, 2),
            "reconciles": int(count),
            "reconcile_seconds_mean": round(total / count, 4) if count else None,
            "reconcile_seconds_p50": round(histogram_quantile(0.5, buckets), 4),
            "reconcile_seconds_p99": round(histogram_quantile(0.99, buckets), 4),
            "operator_rss_mib_idle": round(idle_rss / 1024, 1),
            "operator_rss_mib_peak": round(max(peak, hwm) / 1024, 1),
            "operator_rss_mib_end": round(rss / 1024, 1),
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            "statefulsets": len(statefulsets),
            "partition_jobs": len(partition_jobs),
            "operator_log": str(log_path),
            "started": started,
        }


def _reachable(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
        return True
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=50, help="jobs applied at once (default 50)")
    parser.add_argument(
        "--kubeconfig", help="use this cluster instead of starting the test control plane"
    )
    parser.add_argument("--namespace", default="distgnn-load", help="namespace of the jobs")
    parser.add_argument("--storage-class", default="distgnn-test", help="class of the shared claim")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for each stage"
    )
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds to wait before the final samples"
    )
    args = parser.parse_args()
    result = run(args)
    result.pop("started")
    print(json.dumps(result, indent=2))
    if result["statefulsets"] != 2 * args.jobs or result["partition_jobs"] != args.jobs:
        print("duplicated or missing children", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
