"""The chart lints and renders manifests that the live API server's schemas accept (kubeconform).

The schemas are made offline: core kinds from the test control plane's ``/openapi/v2``, the
chart's CRDs converted (tests.chart.kubeconform_schemas). Nothing is downloaded.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_operator import rbac
from distgnn_operator.constants import (
    LABEL_JOB,
    LABEL_MANAGED_BY,
    LABEL_ROLE,
    MANAGER,
    PORT_METRICS,
)
from tests.chart.helm import Helm, HelmError, documents
from tests.chart.kubeconform_schemas import write_schemas
from tests.chart.values_doc import CHART_DIR
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

# The Prometheus Operator's kinds: their CRDs are not part of this project, so kubeconform has
# no schema for them; test_monitors checks their fields instead.
MONITOR_KINDS = ("ServiceMonitor", "PodMonitor", "PrometheusRule")

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "namespaced-ha-monitors": {
        "operator.replicas": 3,
        "operator.watchNamespaces": ["team-a", "team-b"],
        "metrics.serviceMonitor.enabled": True,
        "metrics.serviceMonitor.labels": {"release": "kube-prometheus-stack"},
        "metrics.podMonitor.enabled": True,
        "metrics.prometheusRule.enabled": True,
        "dashboards.namespace": "monitoring",
        "dashboards.annotations": {"grafana_folder": "distgnn"},
        "kueue.enabled": True,
    },
    "minimal": {
        "serviceAccount.create": False,
        "serviceAccount.name": "existing",
        "rbac.create": False,
        "metrics.service.enabled": False,
        "dashboards.enabled": False,
        "imagePullSecrets": ["registry"],
        "operator.nodeSelector": {"kubernetes.io/os": "linux"},
        "operator.tolerations": [
            {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
        ],
    },
}


@pytest.fixture(scope="module")
def helm(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(control_plane.bin_dir / "helm", tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def schema_location(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    swagger = json.loads(control_plane.kubectl("get", "--raw", "/openapi/v2").stdout)
    crds: list[dict[str, Any]] = []
    for path in sorted((CHART_DIR / "crds").glob("*.yaml")):
        crds.extend(documents(path.read_text()))
    return write_schemas(tmp_path_factory.mktemp("schemas"), swagger, crds)


def kubeconform(
    control_plane: ControlPlane, location: Path, manifests: str, skip: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any]]:
    """Run kubeconform -strict on manifests; returns its exit code and JSON report."""
    command = [
        str(control_plane.bin_dir / "kubeconform"),
        "-strict",
        "-summary",
        "-output", "json",
        "-schema-location", str(location),
        "-kubernetes-version", control_plane.version.lstrip("v").split("-")[0],
    ]  # fmt: skip
    if skip:
        command += ["-skip", ",".join(skip)]
    result = subprocess.run(
        command, input=manifests, capture_output=True, text=True, timeout=120, check=False
    )
    return result.returncode, json.loads(result.stdout)


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        out.setdefault(doc["kind"], []).append(doc)
    return out


@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_lint(helm: Helm, name: str) -> None:
    output = helm.lint(VALUE_SETS[name])
    assert "1 chart(s) linted, 0 chart(s) failed" in output


def test_lint_rejects_values_outside_the_schema(helm: Helm) -> None:
    with pytest.raises(HelmError, match="replica"):
        helm.lint({"operator.replica": 2})
    with pytest.raises(HelmError, match="logLevel"):
        helm.lint({"operator.logLevel": "chatty"})


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rendered_manifests_pass_kubeconform(
    control_plane: ControlPlane, helm: Helm, schema_location: Path, name: str
) -> None:
    rendered = helm.template(
        "dg", "distgnn-system", VALUE_SETS[name], kube_version=control_plane.version,
        include_crds=True,
    )  # fmt: skip
    docs = documents(rendered)
    kinds = _by_kind(docs)
    checked = [d for d in docs if d["kind"] not in MONITOR_KINDS]
    code, report = kubeconform(control_plane, schema_location, rendered, skip=MONITOR_KINDS)
    problems = [r for r in report.get("resources", []) if r.get("status") != "statusSkipped"]
    assert code == 0, json.dumps(problems, indent=2)
    summary = report["summary"]
    assert summary["invalid"] == 0
    assert summary["errors"] == 0
    # Every document was validated against a schema, none skipped for want of one.
    assert summary["valid"] == len(checked)
    assert summary["skipped"] == sum(len(kinds.get(k, [])) for k in MONITOR_KINDS)
    assert len(kinds["CustomResourceDefinition"]) == 3
    assert len(kinds["Deployment"]) == 1


def test_kubeconform_schemas_are_strict(
    control_plane: ControlPlane, helm: Helm, schema_location: Path
) -> None:
    rendered = helm.template("dg", "distgnn-system", kube_version=control_plane.version)
    broken = rendered.replace("readOnlyRootFilesystem:", "readOnlyRootFileSystem:", 1)
    assert broken != rendered
    code, report = kubeconform(control_plane, schema_location, broken)
    assert code != 0
    assert report["summary"]["invalid"] == 1
    job = {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": "j"},
        "spec": {"dataset": {"synthetic": {"numNodes": 100}}, "trainer": {}},
    }
    code, report = kubeconform(control_plane, schema_location, yaml.safe_dump(job))
    assert code != 0, "the converted DistGNNJob schema must reject the unknown field spec.trainer"


def test_service_monitor_needs_the_metrics_service(helm: Helm) -> None:
    values = {"metrics.serviceMonitor.enabled": True, "metrics.service.enabled": False}
    with pytest.raises(HelmError, match=r"metrics\.service\.enabled"):
        helm.template("dg", "distgnn-system", values)


def test_kube_version_constraint(control_plane: ControlPlane, helm: Helm) -> None:
    helm.template("dg", "distgnn-system", kube_version=control_plane.version)
    with pytest.raises(HelmError, match="kubeVersion"):
        helm.template("dg", "distgnn-system", kube_version="1.29.0")


def _deployment(helm: Helm, values: Mapping[str, Any]) -> dict[str, Any]:
    docs = documents(helm.template("dg", "distgnn-system", values))
    (deployment,) = _by_kind(docs)["Deployment"]
    return deployment


def test_operator_pod_is_locked_down(helm: Helm) -> None:
    spec = _deployment(helm, {})["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["command"] == ["python", "-m", "distgnn_operator"]
    pod_sc, sc = spec["securityContext"], container["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert container["resources"]["limits"]["memory"]
    assert {p["name"] for p in container["ports"]} >= {"metrics"}


def test_replicas_select_standalone_or_peering(helm: Helm) -> None:
    single = documents(helm.template("dg", "ns1", {}))
    assert _by_kind(single)["Deployment"][0]["spec"]["strategy"]["type"] == "Recreate"
    assert "ClusterKopfPeering" not in _by_kind(single)
    (role,) = _by_kind(single)["ClusterRole"]
    assert all("kopf.dev" not in r["apiGroups"] for r in role["rules"])

    ha = _by_kind(documents(helm.template("dg", "ns1", {"operator.replicas": 2})))
    (peering,) = ha["ClusterKopfPeering"]
    (role,) = ha["ClusterRole"]
    names = [r.get("resourceNames") for r in role["rules"] if "kopf.dev" in r["apiGroups"]]
    assert [peering["metadata"]["name"]] in names

    namespaced = _by_kind(
        documents(
            helm.template(
                "dg", "ns1", {"operator.replicas": 2, "operator.watchNamespaces": ["a", "b"]}
            )
        )
    )
    assert sorted(p["metadata"]["namespace"] for p in namespaced["KopfPeering"]) == ["a", "b"]
    assert sorted(r["metadata"]["namespace"] for r in namespaced["Role"]) == ["a", "b"]
    assert sorted(r["metadata"]["namespace"] for r in namespaced["RoleBinding"]) == ["a", "b"]
    (cluster_role,) = namespaced["ClusterRole"]
    assert [r["resources"] for r in cluster_role["rules"]] == [
        ["customresourcedefinitions"],
        ["namespaces"],
    ]


def test_monitors(helm: Helm) -> None:
    docs = _by_kind(documents(helm.template("dg", "ns1", VALUE_SETS["namespaced-ha-monitors"])))
    (pod_monitor,) = docs["PodMonitor"]
    spec = pod_monitor["spec"]
    assert spec["jobLabel"] == LABEL_JOB
    assert spec["selector"]["matchLabels"] == {LABEL_MANAGED_BY: MANAGER}
    assert {"key": LABEL_JOB, "operator": "Exists"} in spec["selector"]["matchExpressions"]
    assert spec["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == PORT_METRICS
    role_label = "__meta_kubernetes_pod_label_" + LABEL_ROLE.replace(".", "_").replace("/", "_")
    assert {"sourceLabels": [role_label], "targetLabel": "role"} in endpoint["relabelings"]

    (service_monitor,) = docs["ServiceMonitor"]
    (service,) = docs["Service"]
    selector = service_monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert service_monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (sm_endpoint,) = service_monitor["spec"]["endpoints"]
    assert sm_endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert sm_endpoint["honorLabels"] is True

    (dashboard,) = docs["ConfigMap"]
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "distgnn"}
    source = (CHART_DIR / "files" / "dashboards" / "distgnn-training.json").read_text()
    assert json.loads(dashboard["data"]["distgnn-training.json"]) == json.loads(source)


def test_dashboard_label_is_configurable(helm: Helm) -> None:
    docs = _by_kind(
        documents(
            helm.template(
                "dg", "ns1", {"dashboards.label": "team/dashboards", "dashboards.labelValue": "yes"}
            )
        )
    )
    (dashboard,) = docs["ConfigMap"]
    assert dashboard["metadata"]["labels"]["team/dashboards"] == "yes"
    assert "grafana_dashboard" not in dashboard["metadata"]["labels"]


def _kueue_rules(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        rule
        for doc in docs
        if doc["kind"] == kind
        for rule in doc.get("rules") or []
        if rule["apiGroups"] == ["kueue.x-k8s.io"]
    ]


def test_kueue_rbac_follows_kueue_enabled(helm: Helm) -> None:
    """kueue.enabled grants exactly distgnn_operator.rbac's Kueue rules; off, none at all."""
    off = documents(helm.template("dg", "ns1", {}))
    assert _kueue_rules(off, "ClusterRole") == []
    deployment = _by_kind(off)["Deployment"][0]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}  # fmt: skip
    assert env["DISTGNN_OPERATOR_KUEUE"] == "false"

    wide = documents(helm.template("dg", "ns1", {"kueue.enabled": True}))
    assert (
        _kueue_rules(wide, "ClusterRole") == rbac.KUEUE_CLUSTER_RULES + rbac.KUEUE_NAMESPACED_RULES
    )
    deployment = _by_kind(wide)["Deployment"][0]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}  # fmt: skip
    assert env["DISTGNN_OPERATOR_KUEUE"] == "true"

    scoped = documents(
        helm.template("dg", "ns1", {"kueue.enabled": True, "operator.watchNamespaces": ["a"]})
    )
    assert _kueue_rules(scoped, "ClusterRole") == rbac.KUEUE_CLUSTER_RULES
    assert _kueue_rules(scoped, "Role") == rbac.KUEUE_NAMESPACED_RULES


def test_kueues_service_account_may_read_the_jobs_with_kueue_enabled(helm: Helm) -> None:
    """Kueue, with DistGNNJob among its external frameworks, reads a child's owner: the chart
    grants its ServiceAccount get, list and watch on distgnnjobs, and nothing else."""

    def readers(values: dict[str, Any]) -> list[dict[str, Any]]:
        docs = documents(helm.template("dg", "ns1", values))
        return [d for d in docs if d["metadata"]["name"].endswith("-kueue-reader")]

    assert readers({}) == []
    assert readers({"kueue.enabled": True, "kueue.controllerServiceAccount.name": ""}) == []
    role, binding = sorted(readers({"kueue.enabled": True}), key=lambda d: d["kind"])
    assert (role["kind"], binding["kind"]) == ("ClusterRole", "ClusterRoleBinding")
    assert role["rules"] == [
        {
            "apiGroups": ["distgnn.io"],
            "resources": ["distgnnjobs"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
    ]
    custom = {"kueue.enabled": True, "kueue.controllerServiceAccount.namespace": "queues"}
    (_, moved) = sorted(readers(custom), key=lambda d: d["kind"])
    assert moved["subjects"][0]["namespace"] == "queues"
