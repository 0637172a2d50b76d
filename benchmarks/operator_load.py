"""Load benchmark of the operator: many DistGNNJobs applied at once.

It runs ``python -m distgnn_operator`` as its own process against a control plane (the test
fixture's, started here, or the cluster of ``--kubeconfig``). First one job runs alone, in a
namespace of its own: its settled status, a trainer failure, and its status after the gang
restart are the references. Then it applies N jobs in one ``kubectl apply`` and reports:

- the seconds from the end of the apply until every job is in Training (and until every
  trainer pod is Running);
- p50 and p99 reconcile latency of the load, interpolated from the operator's
  ``distgnn_operator_reconcile_seconds`` histogram as Prometheus' histogram_quantile does;
- the reconciler's API requests per reconcile, by verb (and by verb and resource);
- the seconds from a trainer pod set to Failed to its job's status counting the gang
  restart: for the job alone, and for ``--failures`` jobs failed at once under load (as soon
  as every job is in Training, while the trainers of the others still start);
- whether each job's status at the end equals the job alone's (the failed ones: after its
  restart), with names and timestamps aside; the exit status is 1 when one differs;
- the operator's resident memory (idle, peak, end) and the machine's load averages;
- the reconciles over ``--slow`` seconds, from the operator's log of each with the API
  requests it sent: how many, and what each waited on most (``operator_load_slow.py``);
- with ``--profile``, where the operator's threads spent the load (py-spy).

Usage::

    python benchmarks/operator_load.py --jobs 50
    python benchmarks/operator_load.py --jobs 200 --profile /tmp/operator.raw
    python benchmarks/operator_load.py --kubeconfig ~/.kube/config --namespace load --jobs 50
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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

import urllib3  # noqa: E402
from kubernetes.client import ApiClient  # noqa: E402
from operator_load_metrics import histogram_quantile, per_reconcile, scrape  # noqa: E402
from operator_load_slow import summarize as slow_reconciles  # noqa: E402
from operator_load_status import compare, normalized, time_failures  # noqa: E402
from operator_profile import summarize  # noqa: E402

from distgnn_operator import crd  # noqa: E402
from distgnn_operator.connection import load_configuration  # noqa: E402
from distgnn_operator.constants import LABEL_ROLE  # noqa: E402
from distgnn_operator.local.ports import free_ports  # noqa: E402
from distgnn_operator.reconcile.kube_api import DISTGNNJOB, POD, KubeApi, RestKubeApi  # noqa: E402
from distgnn_operator.settings import OperatorSettings  # noqa: E402


class Kubectl:
    """kubectl with one kubeconfig."""

    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def __call__(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 300
    ) -> str:
        result = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
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


def manifest(name: str, seed: int, claim: str) -> dict[str, Any]:
    """A small CPU job on the claim, with its own dataset seed (so each partitions)."""
    return {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": name},
        "spec": {
            "dataset": {"synthetic": {"numNodes": 10000, "numEdges": 50000, "seed": seed}},
            "samplers": {"replicas": 2},
            "trainers": {"replicas": 2, "gpusPerPod": 0},
            "storage": {"claimName": claim},
        },
    }


def manifests(count: int, claim: str) -> str:
    """N small CPU jobs on one claim, load-000 and on."""
    return "\n---\n".join(json.dumps(manifest(f"load-{i:03d}", i, claim)) for i in range(count))


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def wait(what: str, probe: Any, timeout: float, every: float = 0.5) -> float:
    """Seconds until the probe holds (each stage is logged on stderr). A probe whose request
    times out (an API server swamped by the load) counts as not holding yet."""
    print(f"waiting for {what}", file=sys.stderr, flush=True)
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if probe():
                return time.monotonic() - start
        except (TimeoutError, urllib3.exceptions.HTTPError) as err:
            print(f"  {what}: {err}", file=sys.stderr, flush=True)
        time.sleep(every)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def loadavg() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def prepare_namespace(kubectl: Kubectl, plane: Any, ns: str, claim: str, storage: str) -> None:
    """The namespace and its shared claim (bound to a volume of the test control plane)."""
    kubectl("create", "namespace", ns, check=False)
    if plane is not None:
        plane.create_pv(f"{ns}-{claim}", size="100Gi", claim=(ns, claim))
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": storage,
            "resources": {"requests": {"storage": "100Gi"}},
        },
    }
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(body))


def jobs_in(api: KubeApi, ns: str) -> list[dict[str, Any]]:
    return api.list(DISTGNNJOB, ns, {})


def training_reason(job: dict[str, Any]) -> str | None:
    """The reason of the job's Training condition."""
    conditions = (job.get("status") or {}).get("conditions") or []
    return next((c.get("reason") for c in conditions if c.get("type") == "Training"), None)


def settled(api: KubeApi, ns: str, name: str, restarts: int) -> bool:
    """The job is Training with every pod up, after ``restarts`` gang restarts."""
    return job_running(api.get(DISTGNNJOB, ns, name) or {}, restarts)


def job_running(job: dict[str, Any], restarts: int) -> bool:
    """The job's status: Training with every pod up, after ``restarts`` gang restarts."""
    status = job.get("status") or {}
    return (
        status.get("phase") == "Training"
        and int(status.get("restarts") or 0) == restarts
        and training_reason(job) == "TrainersRunning"
    )


def run_alone(
    api: KubeApi, kubectl: Kubectl, ns: str, claim: str, timeout: float
) -> dict[str, Any]:
    """One job alone: its settled status, then a trainer failure and the settled status after
    the gang restart (the references for the load's jobs)."""
    name = "alone"
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest(name, 0, claim)))
    wait("the job alone running", lambda: settled(api, ns, name, 0), timeout)
    time.sleep(2)
    running = normalized(api.get(DISTGNNJOB, ns, name) or {})
    seen = time_failures(api, ns, [name], timeout)
    wait("the job alone running again", lambda: settled(api, ns, name, 1), timeout)
    time.sleep(2)
    restarted = normalized(api.get(DISTGNNJOB, ns, name) or {})
    return {"running": running, "restarted": restarted, "failure_seconds": seen[name]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with control_plane(args.kubeconfig) as (kubectl, plane):
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / crd.CRD_PATH))
        # Polled, not `kubectl wait`: that fails at once on a CRD with no conditions yet.
        established = '{.status.conditions[?(@.type=="Established")].status}'
        wait(
            "the CRD established",
            lambda: (
                kubectl("get", f"crd/{crd.CRD_NAME}", "-o", f"jsonpath={established}", check=False)
                == "True"
            ),
            60,
        )
        ns, alone_ns, claim = args.namespace, f"{args.namespace}-alone", "load-data"
        for namespace in (ns, alone_ns):
            prepare_namespace(kubectl, plane, namespace, claim, args.storage_class)
        api = RestKubeApi(
            ApiClient(load_configuration(OperatorSettings(kubeconfig=str(kubectl.kubeconfig))))
        )

        (metrics_port,) = free_ports(1)
        env = {
            **os.environ,
            "KUBECONFIG": str(kubectl.kubeconfig),
            "DISTGNN_OPERATOR_KUBECONFIG": str(kubectl.kubeconfig),
            "DISTGNN_OPERATOR_NAMESPACES": f"{ns},{alone_ns}",
            "DISTGNN_OPERATOR_PEERING": "",
            "DISTGNN_OPERATOR_METRICS_PORT": str(metrics_port),
            "DISTGNN_OPERATOR_HEALTH_PORT": "0",
            "DISTGNN_OPERATOR_LOG_LEVEL": "WARNING",
            "DISTGNN_OPERATOR_SLOW_RECONCILE_SECONDS": str(args.slow),
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
            alone = run_alone(api, kubectl, alone_ns, claim, args.timeout)
            idle_rss, _ = rss_kib(operator.pid)
            peak = idle_rss
            before = scrape(metrics_port)
            load_at_start = loadavg()

            started = time.monotonic()
            kubectl(
                "apply",
                "-n",
                ns,
                "-f",
                "-",
                input=manifests(args.jobs, claim),
                timeout=max(300.0, args.timeout),
            )
            applied = time.monotonic() - started
            profiler = start_profile(args.profile, operator.pid)

            def all_in(phase: str) -> bool:
                nonlocal peak
                peak = max(peak, rss_kib(operator.pid)[0])
                jobs = jobs_in(api, ns)
                return len(jobs) == int(args.jobs) and all(
                    (j.get("status") or {}).get("phase") == phase for j in jobs
                )

            def trainers_running() -> bool:
                nonlocal peak
                peak = max(peak, rss_kib(operator.pid)[0])
                pods = api.list(POD, ns, {LABEL_ROLE: "trainer"})
                running = [
                    p
                    for p in pods
                    if p["status"].get("phase") == "Running"
                    and not p["metadata"].get("deletionTimestamp")
                ]
                return len(running) == 2 * int(args.jobs)

            to_training = wait("all jobs in Training", lambda: all_in("Training"), args.timeout)
            failed_jobs = [f"load-{i:03d}" for i in spread(args.jobs, args.failures)]
            load_at_failure = loadavg()
            failure_seconds = time_failures(api, ns, failed_jobs, args.timeout)
            to_running = (time.monotonic() - started - applied) + wait(
                "all trainer pods Running", trainers_running, args.timeout
            )
            profile = stop_profile(profiler, args.profile)

            def every_job_running() -> bool:
                return all(
                    job_running(j, 1 if j["metadata"]["name"] in failed_jobs else 0)
                    for j in jobs_in(api, ns)
                )

            wait(
                "every job running again (the failed ones restarted)",
                every_job_running,
                args.timeout,
            )
            time.sleep(args.settle)
            rss, hwm = rss_kib(operator.pid)
            during = scrape(metrics_port) - before
            jobs = jobs_in(api, ns)
            statefulsets = kubectl.items("statefulsets", "-n", ns)
            partition_jobs = kubectl.items("jobs", "-n", ns)
        finally:
            operator.terminate()
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                operator.kill()
            log.close()
        count = during.count
        return {
            "jobs": args.jobs,
            "control_plane": "test fixture (kwok nodes)"
            if plane is not None
            else str(args.kubeconfig),
            "seconds_to_apply": round(applied, 2),
            "seconds_until_all_training": round(to_training, 2),
            "seconds_until_all_trainers_running": round(to_running, 2),
            "reconciles": int(count),
            "reconcile_seconds_mean": round(during.total / count, 4) if count else None,
            "reconcile_seconds_p50": round(histogram_quantile(0.5, during.buckets), 4),
            "reconcile_seconds_p99": round(histogram_quantile(0.99, during.buckets), 4),
            "api_requests_per_reconcile": per_reconcile(during.requests, count),
            "failure_to_status_seconds_alone": alone["failure_seconds"],
            "failure_to_status_seconds_under_load": failure_seconds,
            "failure_to_status_seconds_max": max(failure_seconds.values()),
            "status_as_alone": compare(jobs, alone, set(failed_jobs)),
            "operator_rss_mib_idle": round(idle_rss / 1024, 1),
            "operator_rss_mib_peak": round(max(peak, hwm) / 1024, 1),
            "operator_rss_mib_end": round(rss / 1024, 1),
            "load_average_at_apply": load_at_start,
            "load_average_at_failure": load_at_failure,
            "load_average_at_end": loadavg(),
            "statefulsets": len(statefulsets),
            "partition_jobs": len(partition_jobs),
            "slow_reconciles": slow_reconciles(log_path, args.slow),
            "operator_log": str(log_path),
            **({"profile": profile} if profile else {}),
        }


PROFILE_RATE = 50


def start_profile(path: Path | None, pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy sampling every thread of the operator (idle ones too), from the apply on."""
    if path is None:
        return None
    command = ["py-spy", "record", "--idle", "--format", "raw", "-r", str(PROFILE_RATE)]
    return subprocess.Popen(
        [*command, "-o", str(path), "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_profile(profiler: subprocess.Popen[bytes] | None, path: Path | None) -> Any:
    """Stop py-spy (it writes its file on SIGINT) and summarize the stacks."""
    if profiler is None or path is None:
        return None
    profiler.send_signal(signal.SIGINT)
    profiler.wait(timeout=60)
    return {"stacks": str(path), **summarize(path, PROFILE_RATE)}


def spread(jobs: int, count: int) -> list[int]:
    """``count`` job indexes spread over the N jobs."""
    count = max(1, min(count, jobs))
    return sorted({round(i * (jobs - 1) / max(1, count - 1)) for i in range(count)})


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
    parser.add_argument(
        "--profile",
        type=Path,
        help="record the operator's stacks with py-spy from the apply until every trainer "
        "runs, into this file, and report where the time went (benchmarks/operator_profile.py)",
    )
    parser.add_argument(
        "--slow",
        type=float,
        default=0.3,
        help="log the reconciles over this many seconds with their API requests (default 0.3)",
    )
    parser.add_argument(
        "--failures",
        type=int,
        default=5,
        help="jobs whose trainer 0 is failed once all jobs are in Training (default 5)",
    )
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result, indent=2))
    ok = True
    if result["statefulsets"] != 2 * args.jobs or result["partition_jobs"] != args.jobs:
        print("duplicated or missing children", file=sys.stderr)
        ok = False
    if not result["status_as_alone"]["equal"]:
        print("a job's status differs from the status of the job alone", file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
