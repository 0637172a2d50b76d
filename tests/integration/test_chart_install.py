"""helm install onto the test control plane; the operator runs with the chart's ServiceAccount.

Each test installs the chart, starts ``python -m distgnn_operator`` as a local process with the
Deployment's settings and a TokenRequest token of the chart's ServiceAccount (not admin), drives
a DistGNNJob through Pending → Partitioning → Training (with a gang restart) → Succeeded and its
TTL deletion, and fails on any Forbidden answer in the operator's log: the RBAC suffices. Access
reviews then show that it grants exactly the reviewed rules and nothing more (no Secrets, no
wildcards), and ``helm uninstall`` must leave no operator object behind (the CRDs stay).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from kubernetes import watch

from distgnn_api.spec import GROUP, PLURAL, VERSION
from distgnn_operator.constants import LABEL_JOB, LABEL_RESTART_GENERATION, LABEL_ROLE
from distgnn_operator.local.ports import free_ports
from tests.chart.helm import Helm
from tests.support.controlplane import ControlPlane
from tests.support.controlplane_client import wait_until
from tests.support.controlplane_cluster import TEST_STORAGE_CLASS
from tests.support.process_group import process_group

pytestmark = pytest.mark.integration

Rule = tuple[str, str, str, str]  # (apiGroup, resource, verb, resourceName or "")

# The reviewed least-privilege rules of the operator (charts/distgnn/README.md, Permissions).
# The test compares what the ServiceAccount may do against this set, so any widening of the
# chart's RBAC must be reviewed here too.
OPERATOR_RULES: frozenset[Rule] = frozenset(
    (group, resource, verb, "")
    for group, resources, verbs in (
        ("distgnn.io", ["distgnnjobs"], ["get", "list", "watch", "patch", "delete"]),
        ("distgnn.io", ["distgnnjobs/status"], ["get", "patch"]),
        ("distgnn.io", ["distgnnjobs/finalizers"], ["update"]),
        ("batch", ["jobs"], ["get", "list", "watch", "create", "patch"]),
        ("apps", ["statefulsets"], ["get", "list", "watch", "create", "patch"]),
        # watched: the reconcile reads a job's children from the operator's watches
        ("", ["configmaps", "services"], ["get", "list", "watch", "create", "patch"]),
        ("", ["persistentvolumeclaims"], ["get", "list", "watch", "create", "patch"]),
        ("networking.k8s.io", ["networkpolicies"], ["get", "list", "watch", "create", "patch"]),
        ("", ["pods"], ["get", "list", "watch", "delete"]),
        ("", ["events"], ["create", "list"]),
        ("apiextensions.k8s.io", ["customresourcedefinitions"], ["list", "watch"]),
    )
    for resource in resources
    for verb in verbs
)


def peering_rules(resource: str, name: str) -> frozenset[Rule]:
    return frozenset(
        {
            ("kopf.dev", resource, "list", ""),
            ("kopf.dev", resource, "watch", ""),
            ("kopf.dev", resource, "get", name),
            ("kopf.dev", resource, "patch", name),
        }
    )


# Requests the operator must never be allowed: (verb, group, resource, subresource, cluster-wide).
FORBIDDEN: tuple[tuple[str, str, str, str, bool], ...] = (
    ("get", "", "secrets", "", False),
    ("list", "", "secrets", "", False),
    ("watch", "", "secrets", "", False),
    ("list", "", "secrets", "", True),
    ("create", "", "pods", "", False),
    ("create", "", "pods", "exec", False),
    ("get", "", "pods", "log", False),
    ("create", "", "serviceaccounts", "token", False),
    ("update", "distgnn.io", "distgnnjobs", "", False),
    ("deletecollection", "distgnn.io", "distgnnjobs", "", False),
    ("create", "distgnn.io", "distgnnjobs", "", False),
    ("delete", "apps", "statefulsets", "", False),
    ("delete", "", "configmaps", "", False),
    ("delete", "", "persistentvolumeclaims", "", False),
    ("list", "", "nodes", "", True),
    ("delete", "", "namespaces", "", True),
    ("list", "", "persistentvolumes", "", True),
    ("create", "rbac.authorization.k8s.io", "clusterroles", "", True),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles", "", True),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", "", True),
    ("create", "rbac.authorization.k8s.io", "rolebindings", "", False),
    ("impersonate", "", "users", "", True),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", "", True),
    ("update", "apiextensions.k8s.io", "customresourcedefinitions", "", True),
)

RELEASE = "dg"


# --------------------------------------------------------------------------- helpers


def close(api: k8s.ApiClient) -> None:
    """Close an API client's connection pool."""
    api.close()  # type: ignore[no-untyped-call]


@dataclass
class Release:
    """An installed release and what the tests need to know of it."""

    helm: Helm
    namespace: str
    manifest: list[dict[str, Any]]

    def one(self, kind: str) -> dict[str, Any]:
        (obj,) = [d for d in self.manifest if d["kind"] == kind]
        return obj

    @property
    def service_account(self) -> str:
        return str(self.one("ServiceAccount")["metadata"]["name"])

    def operator_env(self) -> dict[str, str]:
        """The operator container's env as the Deployment sets it, downward API filled in."""
        (container,) = self.one("Deployment")["spec"]["template"]["spec"]["containers"]
        env: dict[str, str] = {}
        for item in container["env"]:
            if "value" in item:
                env[item["name"]] = item["value"]
            elif item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name":
                env[item["name"]] = f"{RELEASE}-operator-test"
            elif item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace":
                env[item["name"]] = self.namespace
        return env


@contextmanager
def installed(
    control_plane: ControlPlane, tmp_path: Path, namespace: str, values: dict[str, Any]
) -> Iterator[Release]:
    helm = Helm(control_plane.bin_dir / "helm", tmp_path / "helm", control_plane.kubeconfig)
    helm.install(RELEASE, namespace, values)
    release = Release(helm, namespace, helm.manifest(RELEASE, namespace))
    try:
        yield release
    finally:
        helm.run("uninstall", RELEASE, "--namespace", namespace, "--ignore-not-found", "--wait")


@dataclass
class OperatorProcess:
    """``python -m distgnn_operator`` running as the ServiceAccount."""

    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def forbidden_lines(self) -> list[str]:
        """The log's refusals, but those of namespaces being deleted: the API server refuses
        new content there with a 403 that is no RBAC denial (another test's namespace, on a
        cluster-wide operator)."""
        lines = self.log().splitlines()
        terminating = {
            m.group(1)
            for line in lines
            if (m := re.search(r"in namespace (\S+) because it is being terminated", line))
        }
        return [
            line
            for line in lines
            if ("Forbidden" in line or " 403" in line or "could not post event" in line)
            and not any(
                f"/namespaces/{ns}/" in line or f"namespace {ns} " in line for ns in terminating
            )
        ]


@contextmanager
def operator_as_service_account(
    control_plane: ControlPlane, release: Release, tmp_path: Path
) -> Iterator[OperatorProcess]:
    kubeconfig = control_plane.token_kubeconfig(release.namespace, release.service_account)
    metrics_port, health_port = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
    env.update(release.operator_env())
    env.update(
        {
            "KUBECONFIG": str(kubeconfig),
            "DISTGNN_OPERATOR_KUBECONFIG": str(kubeconfig),
            "DISTGNN_OPERATOR_METRICS_PORT": str(metrics_port),
            "DISTGNN_OPERATOR_HEALTH_PORT": str(health_port),
            "DISTGNN_OPERATOR_PROGRESS_POLL_INTERVAL": "1",
            "DISTGNN_OPERATOR_LOG_LEVEL": "DEBUG",
        }
    )
    log_path = tmp_path / "operator.log"
    command = [sys.executable, "-m", "distgnn_operator"]
    with process_group(command, env, log_path) as process:
        yield OperatorProcess(process, log_path, metrics_port)


class PhaseRecorder:
    """Every phase the job's status passes through, seen by an admin watch."""

    def __init__(self, api: k8s.ApiClient, namespace: str, name: str) -> None:
        self.phases: list[str] = []
        self._api = api
        self.deleted = threading.Event()
        self._stopping = False
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        self._listed = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(api, namespace, name), daemon=True)
        self._thread.start()
        # Writes made before the watch connects would be missed: wait for the list that fixes
        # the resourceVersion the watch starts from.
        if not self._listed.wait(timeout=30):
            raise TimeoutError("the phase watch did not start")

    def _run(self, api: k8s.ApiClient, namespace: str, name: str) -> None:
        try:
            self._record(api, namespace, name)
        except Exception:
            if not self._stopping:
                raise

    def _record(self, api: k8s.ApiClient, namespace: str, name: str) -> None:
        objects = k8s.CustomObjectsApi(api)
        selector = f"metadata.name={name}"
        listed = cast(
            dict[str, Any],
            objects.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, field_selector=selector
            ),
        )
        self._listed.set()
        for event in self._watch.stream(  # type: ignore[no-untyped-call]
            objects.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            field_selector=selector,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=600,
        ):
            if event["type"] == "DELETED":
                self.deleted.set()
                continue
            phase = (event["object"].get("status") or {}).get("phase")
            if phase and (not self.phases or self.phases[-1] != phase):
                self.phases.append(phase)

    def stop(self) -> None:
        self._stopping = True
        self._watch.stop()  # type: ignore[no-untyped-call]
        close(self._api)  # ends the open watch request
        self._thread.join(timeout=10)


def job_manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DistGNNJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "dataset": {
                "synthetic": {"numNodes": 1000, "numEdges": 4000, "numFeatures": 8, "numClasses": 4}
            },
            "samplers": {"replicas": 1},
            "trainers": {"replicas": 2, "gpusPerPod": 1},
            "training": {"epochs": 1},
            "storage": {
                "storageClassName": TEST_STORAGE_CLASS,
                "size": "1Gi",
                "accessModes": ["ReadWriteMany"],
            },
            "runPolicy": {"backoffLimit": 2, "ttlSecondsAfterFinished": 3},
        },
    }


def wait(
    operator: OperatorProcess, condition: Callable[[], Any], what: str, timeout: float = 120.0
) -> Any:
    """wait_until, with the operator's log tail when it times out or the operator died."""

    def check() -> Any:
        if operator.process.poll() is not None:
            raise AssertionError(
                f"the operator exited {operator.process.returncode}:\n{operator.log()[-4000:]}"
            )
        return condition()

    try:
        return wait_until(check, timeout, what)
    except TimeoutError as err:
        raise AssertionError(f"{err}\noperator log tail:\n{operator.log()[-4000:]}") from None


def pods(control_plane: ControlPlane, namespace: str, job: str, role: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = control_plane.get_json(
        "pods", "-n", namespace, "-l", f"{LABEL_JOB}={job},{LABEL_ROLE}={role}"
    )["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def running(pod: dict[str, Any]) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Running")


def drive_job(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str, name: str = "train"
) -> list[str]:
    """Run one job to Succeeded with a gang restart on the way; returns the phases seen."""
    control_plane.create_pv(f"{namespace}-{name}", size="1Gi", claim=(namespace, f"{name}-data"))
    recorder = PhaseRecorder(control_plane.api_client(), namespace, name)
    try:
        control_plane.apply(job_manifest(name, namespace))

        def phase() -> str | None:
            obj = control_plane.get_json("dgj", name, "-n", namespace)
            return (obj.get("status") or {}).get("phase")

        # kwok completes the partition Job's pod; the job then starts its StatefulSets.
        wait(operator, lambda: phase() == "Training", "the job to reach Training")
        wait(
            operator,
            lambda: (
                len([p for p in pods(control_plane, namespace, name, "trainer") if running(p)]) == 2
                and len([p for p in pods(control_plane, namespace, name, "sampler") if running(p)])
                == 1
            ),
            "2 trainers and 1 sampler Running",
        )
        # A trainer fails: the operator restarts the gang (deletes every pod of the old generation).
        first = {p["metadata"]["uid"] for p in pods(control_plane, namespace, name, "trainer")}
        control_plane.kubectl(
            "annotate", "pod", "-n", namespace, f"{name}-trainer-1", "kwok.distgnn.io/exit-code=1"
        )
        wait(
            operator,
            lambda: (
                (control_plane.get_json("dgj", name, "-n", namespace).get("status") or {}).get(
                    "restarts"
                )
                == 1
            ),
            "status.restarts to become 1",
        )

        def restarted() -> list[dict[str, Any]] | None:
            current = [
                p
                for p in pods(control_plane, namespace, name, "trainer")
                if p["metadata"]["uid"] not in first
                and p["metadata"]["labels"].get(LABEL_RESTART_GENERATION) == "1"
                and running(p)
            ]
            return current if len(current) == 2 else None

        new_trainers = wait(operator, restarted, "2 trainers of restart generation 1 Running")
        # Both trainers finish: the job Succeeds, then its TTL deletes it.
        for pod in new_trainers:
            control_plane.kubectl(
                "annotate",
                "pod",
                "-n",
                namespace,
                pod["metadata"]["name"],
                "kwok.distgnn.io/exit-code=0",
            )
        wait(operator, recorder.deleted.is_set, "the job to Succeed and be deleted by its TTL")
    finally:
        recorder.stop()
    return recorder.phases


def job_event_reasons(control_plane: ControlPlane, namespace: str, name: str) -> set[str]:
    events = control_plane.get_json(
        "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    )["items"]
    return {e["reason"] for e in events}


def granted_rules(api: k8s.ApiClient, namespace: str) -> set[Rule]:
    """What the client's user may do in a namespace (SelfSubjectRulesReview), one rule per tuple."""
    review = k8s.AuthorizationV1Api(api).create_self_subject_rules_review(
        k8s.V1SelfSubjectRulesReview(spec=k8s.V1SelfSubjectRulesReviewSpec(namespace=namespace))
    )
    status = review.status
    assert status is not None
    assert not status.incomplete, status.evaluation_error
    out: set[Rule] = set()
    for rule in status.resource_rules:
        for group in rule.api_groups or [""]:
            for resource in rule.resources or []:
                for verb in rule.verbs:
                    for name in rule.resource_names or [""]:
                        out.add((group, resource, verb, name))
    return out


def allowed(
    api: k8s.ApiClient,
    verb: str,
    group: str,
    resource: str,
    subresource: str,
    namespace: str | None,
) -> bool:
    review = k8s.AuthorizationV1Api(api).create_self_subject_access_review(
        k8s.V1SelfSubjectAccessReview(
            spec=k8s.V1SelfSubjectAccessReviewSpec(
                resource_attributes=k8s.V1ResourceAttributes(
                    verb=verb,
                    group=group,
                    resource=resource,
                    subresource=subresource or None,
                    namespace=namespace,
                )
            )
        )
    )
    assert review.status is not None
    return bool(review.status.allowed)


def check_least_privilege(
    control_plane: ControlPlane,
    release: Release,
    job_namespace: str,
    expected: frozenset[Rule],
    outside_namespace: str | None,
) -> None:
    """The SA's rules are exactly `expected` beyond what every ServiceAccount may do."""
    sa = control_plane.api_client(
        control_plane.token_kubeconfig(release.namespace, release.service_account)
    )
    # The namespace's default ServiceAccount has no bindings: its rules are the baseline that
    # every authenticated ServiceAccount gets (self reviews, discovery).
    nobody = control_plane.api_client(control_plane.token_kubeconfig(release.namespace, "default"))
    try:
        baseline = granted_rules(nobody, job_namespace)
        extra = granted_rules(sa, job_namespace) - baseline
        assert extra == set(expected), (
            f"the ServiceAccount may do more than reviewed: {sorted(extra - expected)}; "
            f"or less: {sorted(expected - extra)}"
        )
        for group, resource, verb, _ in extra:
            assert "*" not in (group, resource, verb)
            assert resource != "secrets"
        for verb, group, resource, sub, cluster in FORBIDDEN:
            ns = None if cluster else job_namespace
            assert not allowed(sa, verb, group, resource, sub, ns), (
                f"the operator may {verb} {group or 'core'}/{resource}{'/' + sub if sub else ''}"
                f" {'cluster-wide' if cluster else 'in ' + job_namespace}"
            )
        if outside_namespace is not None:
            for verb in ("get", "list", "watch", "patch"):
                assert not allowed(sa, verb, GROUP, PLURAL, "", outside_namespace)
            assert not allowed(sa, "create", "apps", "statefulsets", "", outside_namespace)
    finally:
        close(sa)
        close(nobody)


def check_operator_metrics(operator: OperatorProcess) -> None:
    """The operator serves the metrics the dashboard's operator panels query."""
    with urllib.request.urlopen(
        f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=5
    ) as r:
        text = r.read().decode()
    for series in (
        "distgnn_operator_reconcile_seconds_bucket",
        "distgnn_operator_phase_transitions_total",
        "distgnn_operator_jobs_created_total",
    ):
        assert series in text, f"{series} missing from the operator's /metrics"


def check_uninstalled(control_plane: ControlPlane, release: Release, namespaces: list[str]) -> None:
    """No object of the release is left; the CRDs are."""
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/managed-by=Helm"
    for ns in namespaces:
        left = control_plane.get_json(
            "deployments,serviceaccounts,services,configmaps,roles,rolebindings,kopfpeerings",
            "-n", ns, "-l", selector,
        )["items"]  # fmt: skip
        assert not left, [f"{o['kind']}/{o['metadata']['name']}" for o in left]
    cluster_left = control_plane.get_json(
        "clusterroles,clusterrolebindings,clusterkopfpeerings", "-l", selector
    )["items"]
    mine = [o for o in cluster_left if release.namespace in o["metadata"]["name"]]
    assert not mine, [f"{o['kind']}/{o['metadata']['name']}" for o in mine]
    for obj in release.manifest:
        kind, meta = obj["kind"], obj["metadata"]
        ns_args = ["-n", meta["namespace"]] if "namespace" in meta else []
        result = control_plane.kubectl(
            "get", kind.lower(), meta["name"], *ns_args, "--ignore-not-found", "-o", "name"
        )
        assert not result.stdout.strip(), f"{kind} {meta['name']} is left after helm uninstall"
    for crd in ("distgnnjobs.distgnn.io", "kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"):
        control_plane.kubectl("get", "crd", crd)  # raises if Helm removed it


def assert_phases(phases: list[str]) -> None:
    expected = ["Pending", "Partitioning", "Training", "Succeeded"]
    assert phases == expected, f"phases seen {phases}, expected {expected}"


# --------------------------------------------------------------------------- tests


def test_cluster_wide_install_runs_a_job_with_the_service_account(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    with installed(control_plane, tmp_path, namespace, {}) as release:
        kinds = sorted(d["kind"] for d in release.manifest)
        assert kinds == [
            "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service",
            "ServiceAccount",
        ]  # fmt: skip
        deployment = control_plane.get_json("deployment", RELEASE + "-distgnn", "-n", namespace)
        assert deployment["status"].get("readyReplicas") == 1

        with operator_as_service_account(control_plane, release, tmp_path) as operator:
            phases = drive_job(control_plane, operator, namespace)
            check_operator_metrics(operator)
            assert not operator.forbidden_lines(), "\n".join(operator.forbidden_lines())
        assert_phases(phases)
        reasons = job_event_reasons(control_plane, namespace, "train")
        assert {"PartitionJobSucceeded", "GangRestart", "TrainersSucceeded"} <= reasons, reasons

        check_least_privilege(control_plane, release, namespace, OPERATOR_RULES, None)
        sa = control_plane.api_client(
            control_plane.token_kubeconfig(namespace, release.service_account)
        )
        try:
            assert not allowed(sa, "list", "", "namespaces", "", None)
        finally:
            close(sa)
        release.helm.uninstall(RELEASE, namespace)
        check_uninstalled(control_plane, release, [namespace])


def test_namespaced_peered_install_runs_a_job_with_the_service_account(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    jobs = control_plane.create_namespace("chart-jobs")
    try:
        values = {"operator.replicas": 2, "operator.watchNamespaces": [jobs]}
        with installed(control_plane, tmp_path, namespace, values) as release:
            (peering,) = [d for d in release.manifest if d["kind"] == "KopfPeering"]
            assert peering["metadata"]["namespace"] == jobs
            peering_name = peering["metadata"]["name"]
            assert release.operator_env()["DISTGNN_OPERATOR_PEERING"] == peering_name

            with operator_as_service_account(control_plane, release, tmp_path) as operator:
                phases = drive_job(control_plane, operator, jobs)
                # The replica keeps its keep-alive in the chart's peering object.
                obj = control_plane.get_json("kopfpeering", peering_name, "-n", jobs)
                assert obj.get("status"), f"no keep-alive in the peering object: {obj}"
                assert not operator.forbidden_lines(), "\n".join(operator.forbidden_lines())
            assert_phases(phases)

            cluster_only = frozenset(
                {r for r in OPERATOR_RULES if r[0] == "apiextensions.k8s.io"}
                | {("", "namespaces", "list", ""), ("", "namespaces", "watch", "")}
            )
            check_least_privilege(
                control_plane,
                release,
                jobs,
                OPERATOR_RULES | cluster_only | peering_rules("kopfpeerings", peering_name),
                outside_namespace=namespace,
            )
            # Outside the watched namespace only the cluster-wide listing of CRDs and namespaces.
            sa = control_plane.api_client(
                control_plane.token_kubeconfig(namespace, release.service_account)
            )
            nobody = control_plane.api_client(control_plane.token_kubeconfig(namespace, "default"))
            try:
                outside = granted_rules(sa, namespace) - granted_rules(nobody, namespace)
            finally:
                close(sa)
                close(nobody)
            assert outside == set(cluster_only), sorted(outside)
            release.helm.uninstall(RELEASE, namespace)
            check_uninstalled(control_plane, release, [namespace, jobs])
    finally:
        control_plane.delete_namespace(jobs)
