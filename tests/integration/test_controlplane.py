"""The test control plane behaves like a real cluster: pinned version, Jobs, StatefulSets,
GPU scheduling, garbage collection, simulated container exits, static PVs, ServiceAccount
tokens under RBAC, and clear errors when a component cannot start."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlane
from tests.support.controlplane_binaries import BUILD_SCRIPT, REPO_ROOT
from tests.support.controlplane_client import wait_until
from tests.support.controlplane_cluster import (
    EXIT_CODE_ANNOTATION,
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    NODES,
    TEST_STORAGE_CLASS,
)
from tests.support.controlplane_errors import ComponentError, KubectlError
from tests.support.controlplane_processes import PortAllocator

pytestmark = pytest.mark.integration

IMAGE = "registry.invalid/distgnn-test:1"  # never pulled: kwok runs no containers
WAIT = 60.0


def pinned_kube_version() -> str:
    match = re.search(r"^KUBE_VERSION=(v\S+)$", BUILD_SCRIPT.read_text(), re.MULTILINE)
    assert match, f"KUBE_VERSION not found in {BUILD_SCRIPT}"
    return match.group(1)


def manifest(api_version: str, kind: str, name: str, **body: Any) -> dict[str, Any]:
    """An object of ``kind`` named ``name``; ``metadata`` adds to its metadata, other
    keywords are its top-level fields (``spec``, ``data``)."""
    metadata = {"name": name, **body.pop("metadata", {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": IMAGE}
    container.update(spec.pop("container", {}))
    metadata = spec.pop("metadata", {})
    return manifest("v1", "Pod", name, metadata=metadata, spec={"containers": [container], **spec})


def batch_job(name: str, **pod_metadata: Any) -> dict[str, Any]:
    """A Job of one pod that is never retried; ``pod_metadata`` goes on its pod template."""
    template: dict[str, Any] = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": IMAGE}]}
    }
    if pod_metadata:
        template["metadata"] = pod_metadata
    return manifest("batch/v1", "Job", name, spec={"backoffLimit": 0, "template": template})


def wait_for_condition(
    control_plane: ControlPlane, namespace: str, resource: str, name: str, type_: str, status: str
) -> dict[str, Any]:
    """The object once its condition ``type_`` has ``status``."""
    found: dict[str, Any] = control_plane.wait_for(
        resource,
        name,
        "-n",
        namespace,
        until=lambda obj: condition(obj, type_) == status,
        what=f"{resource} {name} to have {type_}={status}",
    )
    return found


def etcd_argv(control_plane: ControlPlane, data_dir: Path, client: str, peer: int) -> list[str]:
    """etcd serving clients on ``client`` (host:port) and peers on loopback port ``peer``."""
    return [
        str(control_plane.bin_dir / "etcd"),
        f"--data-dir={data_dir}",
        f"--listen-client-urls=http://{client}",
        f"--advertise-client-urls=http://{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
    ]


def condition(obj: dict[str, Any], kind: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def test_server_reports_pinned_version(control_plane: ControlPlane) -> None:
    pinned = pinned_kube_version()
    assert control_plane.version == pinned
    versions = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == pinned
    assert versions["clientVersion"]["gitVersion"] == pinned


def test_job_pod_runs_on_kwok_node_and_job_completes(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.apply(batch_job("hello"), namespace)
    done = wait_for_condition(control_plane, namespace, "job", "hello", "Complete", "True")
    assert done["status"]["succeeded"] == 1
    pods = control_plane.get_json("pods", "-n", namespace, "-l", "job-name=hello")["items"]
    assert len(pods) == 1
    assert pods[0]["spec"]["nodeName"] in {n.name for n in NODES}
    assert pods[0]["status"]["phase"] == "Succeeded"


def test_statefulset_with_headless_service_gets_ordinal_pods(
    control_plane: ControlPlane, namespace: str
) -> None:
    labels = {"app": "peers"}
    service = manifest(
        "v1",
        "Service",
        "peers",
        spec={"clusterIP": "None", "selector": labels, "ports": [{"name": "rpc", "port": 29500}]},
    )
    statefulset = manifest(
        "apps/v1",
        "StatefulSet",
        "trainer",
        spec={
            "serviceName": "peers",
            "replicas": 3,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": IMAGE}]},
            },
        },
    )
    control_plane.apply([service, statefulset], namespace)
    wait_until(
        lambda: (
            control_plane.get_json("sts", "trainer", "-n", namespace)["status"].get("readyReplicas")
            == 3
        ),
        WAIT,
        "3 ready replicas of StatefulSet trainer",
    )
    pods = control_plane.get_json("pods", "-n", namespace, "-l", "app=peers")["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["trainer-0", "trainer-1", "trainer-2"]
    for p in pods:
        name = p["metadata"]["name"]
        assert p["spec"]["hostname"] == name
        assert p["spec"]["subdomain"] == "peers"
        assert p["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == name.rsplit("-", 1)[1]
    assert control_plane.get_json("svc", "peers", "-n", namespace)["spec"]["clusterIP"] == "None"


def test_gpu_pods_land_only_on_gpu_nodes(control_plane: ControlPlane, namespace: str) -> None:
    gpu_nodes = {
        n["metadata"]["name"]
        for n in control_plane.get_json("nodes", "-l", f"{GPU_PRESENT_LABEL}=true")["items"]
    }
    assert gpu_nodes == {n.name for n in NODES if n.gpus}
    gpu_request = {"resources": {"limits": {GPU_RESOURCE: "2"}}}
    names = [f"gpu-{i}" for i in range(6)]
    control_plane.apply([pod(name, container=gpu_request) for name in names], namespace)
    # More GPUs than any node has: must stay unscheduled.
    control_plane.apply(
        pod("too-many", container={"resources": {"limits": {GPU_RESOURCE: "9"}}}), namespace
    )

    def placed() -> dict[str, str] | None:
        items = control_plane.get_json("pods", "-n", namespace)["items"]
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in items}
        return nodes if all(nodes.get(n) for n in names) else None

    nodes = wait_until(placed, WAIT, "the GPU pods to be scheduled")
    assert {nodes[n] for n in names} <= gpu_nodes
    too_many = wait_for_condition(
        control_plane, namespace, "pod", "too-many", "PodScheduled", "False"
    )
    assert not too_many["spec"].get("nodeName")
    reasons = [c.get("message", "") for c in too_many["status"]["conditions"]]
    assert any(f"Insufficient {GPU_RESOURCE}" in m for m in reasons), reasons


def test_deleting_owner_garbage_collects_dependents(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl("create", "configmap", "owner", "-n", namespace)
    owner = control_plane.get_json("configmap", "owner", "-n", namespace)
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    dependent_cm = manifest(
        "v1", "ConfigMap", "dependent", metadata={"ownerReferences": [ref]}, data={"k": "v"}
    )
    dependent_pod = pod("dependent-pod", metadata={"ownerReferences": [ref]})
    control_plane.apply([dependent_cm, dependent_pod], namespace)
    wait_until(
        lambda: (
            control_plane.get_json("pod", "dependent-pod", "-n", namespace)["status"].get("phase")
            == "Running"
        ),
        WAIT,
        "pod dependent-pod to run",
    )
    control_plane.kubectl("delete", "configmap", "owner", "-n", namespace)

    def remaining() -> list[str]:
        cms = control_plane.get_json("configmaps", "-n", namespace)["items"]
        pods = control_plane.get_json("pods", "-n", namespace)["items"]
        return [
            o["metadata"]["name"] for o in cms + pods if o["metadata"]["name"] != "kube-root-ca.crt"
        ]

    wait_until(lambda: remaining() == [], WAIT, "the dependents to be garbage-collected")


def _exited_pod(control_plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    def exited() -> dict[str, Any] | None:
        p = control_plane.get_json("pod", name, "-n", namespace)
        statuses = p["status"].get("containerStatuses") or []
        return p if statuses and all("terminated" in s["state"] for s in statuses) else None

    return wait_until(exited, WAIT, f"the containers of pod {name} to terminate")


def test_simulated_exit_annotation_terminates_containers(
    control_plane: ControlPlane, namespace: str
) -> None:
    two_containers = pod("worker")
    two_containers["spec"]["containers"].append({"name": "sidecar", "image": IMAGE})
    control_plane.apply(two_containers, namespace)
    wait_until(
        lambda: (
            condition(control_plane.get_json("pod", "worker", "-n", namespace), "Ready") == "True"
        ),
        WAIT,
        "pod worker to be ready",
    )
    control_plane.kubectl("annotate", "pod", "worker", "-n", namespace, f"{EXIT_CODE_ANNOTATION}=3")
    worker = _exited_pod(control_plane, namespace, "worker")
    states = [s["state"]["terminated"] for s in worker["status"]["containerStatuses"]]
    assert [(s["exitCode"], s["reason"]) for s in states] == [(3, "Error"), (3, "Error")]
    assert condition(worker, "Ready") == "False"
    # restartPolicy Always: the pod is not finished, as with a real kubelet.
    assert worker["status"]["phase"] == "Running"

    control_plane.apply(pod("once", restartPolicy="Never"), namespace)
    wait_until(
        lambda: (
            control_plane.get_json("pod", "once", "-n", namespace)["status"].get("phase")
            == "Running"
        ),
        WAIT,
        "pod once to run",
    )
    control_plane.kubectl("annotate", "pod", "once", "-n", namespace, f"{EXIT_CODE_ANNOTATION}=0")
    once = _exited_pod(control_plane, namespace, "once")
    (state,) = [s["state"]["terminated"] for s in once["status"]["containerStatuses"]]
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    assert once["status"]["phase"] == "Succeeded"


def test_simulated_exit_fails_a_job(control_plane: ControlPlane, namespace: str) -> None:
    job = batch_job("doomed", annotations={EXIT_CODE_ANNOTATION: "2"})
    control_plane.apply(job, namespace)
    failed = wait_for_condition(control_plane, namespace, "job", "doomed", "Failed", "True")
    assert failed["status"].get("failed") == 1
    assert not failed["status"].get("succeeded")
    (job_pod,) = control_plane.get_json("pods", "-n", namespace, "-l", "job-name=doomed")["items"]
    (state,) = [s["state"]["terminated"] for s in job_pod["status"]["containerStatuses"]]
    assert state["exitCode"] == 2


def test_create_pv_binds_a_claim(control_plane: ControlPlane, namespace: str) -> None:
    pv = control_plane.create_pv(f"{namespace}-data", size="5Gi", claim=(namespace, "data"))
    claim = manifest(
        "v1",
        "PersistentVolumeClaim",
        "data",
        spec={
            "accessModes": ["ReadWriteMany"],
            "storageClassName": TEST_STORAGE_CLASS,
            "resources": {"requests": {"storage": "5Gi"}},
        },
    )
    control_plane.apply(claim, namespace)
    bound = control_plane.wait_for(
        "pvc",
        "data",
        "-n",
        namespace,
        until=lambda c: c["status"].get("phase") == "Bound",
        what="claim data to bind",
    )
    assert bound["spec"]["volumeName"] == pv
    assert control_plane.get_json("pv", pv)["status"]["phase"] == "Bound"


def test_token_kubeconfig_authenticates_as_the_service_account(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    kubeconfig = control_plane.token_kubeconfig(namespace, "reader")
    whoami = json.loads(
        control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig).stdout
    )
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:reader"
    with pytest.raises(KubectlError, match="forbidden"):
        control_plane.kubectl("get", "secrets", "-n", namespace, kubeconfig=kubeconfig)
    # RBAC, not a broken token, decides: a Role grant makes listing pods work.
    control_plane.kubectl(
        "create", "role", "pod-reader", "--verb=list", "--resource=pods", "-n", namespace
    )
    control_plane.kubectl(
        "create",
        "rolebinding",
        "reader",
        "--role=pod-reader",
        f"--serviceaccount={namespace}:reader",
        "-n",
        namespace,
    )
    wait_until(
        lambda: (
            control_plane.kubectl(
                "get", "pods", "-n", namespace, kubeconfig=kubeconfig, check=False
            ).returncode
            == 0
        ),
        WAIT,
        "the RoleBinding to take effect",
    )


def test_api_client_talks_to_the_server(control_plane: ControlPlane) -> None:
    from kubernetes import client

    with control_plane.api_client() as api:
        nodes = client.CoreV1Api(api).list_node().items
    gpus: dict[str, str | None] = {}
    for node in nodes:
        assert node.metadata is not None
        assert node.metadata.name
        assert node.status is not None
        assert node.status.capacity is not None
        gpus[node.metadata.name] = node.status.capacity.get(GPU_RESOURCE)
    assert gpus == {n.name: (str(n.gpus) if n.gpus else None) for n in NODES}


def test_component_with_bad_flag_fails_with_clear_error(control_plane: ControlPlane) -> None:
    argv = [str(control_plane.bin_dir / "kube-scheduler"), "--no-such-flag"]
    with pytest.raises(ComponentError) as failure:
        control_plane.start_component(
            "kube-scheduler", argv, ready=lambda: False, log_name="kube-scheduler-bad-flag"
        )
    log = control_plane.log_dir / "kube-scheduler-bad-flag.log"
    message = str(failure.value)
    assert "'kube-scheduler'" in message
    assert "exited with code" in message
    assert str(log) in message
    assert "unknown flag: --no-such-flag" in message  # the log's tail is quoted
    assert failure.value.log_path == log
    # A failed extra component is not held against the running control plane.
    control_plane.check_alive()


def test_component_on_busy_port_fails_with_clear_error(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    busy = control_plane.server.removeprefix("https://")  # the API server's address
    argv = etcd_argv(control_plane, tmp_path / "etcd", busy, PortAllocator().take())
    with pytest.raises(ComponentError, match=r"'etcd' exited with code") as failure:
        control_plane.start_component("etcd", argv, ready=lambda: False, log_name="etcd-busy-port")
    assert "address already in use" in str(failure.value)
    assert str(control_plane.log_dir / "etcd-busy-port.log") in str(failure.value)


def test_component_that_never_gets_ready_times_out_and_is_stopped(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    ports = PortAllocator()
    client, peer = ports.take(), ports.take()
    argv = etcd_argv(control_plane, tmp_path / "etcd", f"127.0.0.1:{client}", peer)

    def never() -> bool:
        raise RuntimeError("probe refuses")

    with pytest.raises(ComponentError, match=r"did not become ready within 3s") as failure:
        control_plane.start_component(
            "etcd", argv, ready=never, timeout=3, log_name="etcd-never-ready"
        )
    assert "probe refuses" in str(failure.value)
    assert failure.value.process is not None
    assert failure.value.process.poll() is not None  # stopped, not left running
    assert failure.value.log_path == control_plane.log_dir / "etcd-never-ready.log"


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_failed_start_names_component_and_stops_the_others(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    # A bin dir whose kube-apiserver exits at once; everything else is real.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for binary in control_plane.bin_dir.iterdir():
        if binary.is_file() and os.access(binary, os.X_OK):
            (bin_dir / binary.name).symlink_to(binary)
    fake = bin_dir / "kube-apiserver"
    fake.unlink()
    fake.write_text("#!/bin/sh\necho 'E0000 simulated start failure' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    workdir = tmp_path / "plane"

    with pytest.raises(ComponentError) as failure:
        ControlPlane.start(bin_dir, workdir=workdir, startup_timeout=60)
    message = str(failure.value)
    assert "'kube-apiserver' exited with code 3" in message
    assert str(workdir / "logs" / "kube-apiserver.log") in message
    assert "simulated start failure" in message
    # etcd had started; it is gone, and the logs are kept.
    assert _processes_mentioning(str(workdir)) == []
    assert (workdir / "logs" / "etcd.log").is_file()
    assert not (workdir / "etcd").exists()


def test_components_end_when_the_test_process_dies(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    # A second control plane in a child process that is then SIGKILLed: it gets no
    # chance to clean up, so only the kernel's parent-death signal can end its components.
    workdir = tmp_path / "plane"
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "from pathlib import Path\n"
        "from tests.support.controlplane import ControlPlane\n"
        f"ControlPlane.start(Path({str(control_plane.bin_dir)!r}), workdir=Path({str(workdir)!r}))\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-P", "-c", script],
        cwd=tmp_path,  # not the repository: its operator/ folder would shadow the stdlib
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "ready", child.stderr.read() if child.stderr else ""
        components = [p for p in _processes_mentioning(str(workdir)) if p != child.pid]
        assert len(components) == 5  # etcd, kube-apiserver, ...-manager, -scheduler, kwok
    finally:
        child.kill()
        child.communicate()
    wait_until(
        lambda: _processes_mentioning(str(workdir)) == [],
        30,
        f"the components of the killed test process to end: {_processes_mentioning(str(workdir))}",
    )
