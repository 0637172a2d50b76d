"""The chart's PodMonitor and ServiceMonitor as plain Prometheus scrape configurations.

The Prometheus Operator turns a monitor into a scrape configuration over Kubernetes service
discovery: it keeps the selected pods (or endpoints) and port, and relabels
``__meta_kubernetes_*`` into ``namespace``, ``pod``, ``container``, ``endpoint``, ``job``
and the monitor's own relabelings. The same rules are written here for the fields the chart
uses (anything else fails loudly), so the tests' Prometheus labels series exactly as a cluster's
would. Targets then come from a file_sd file that carries those ``__meta_kubernetes_*`` labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from typing import Any

_KNOWN_POD_ENDPOINT = {"port", "path", "interval", "scrapeTimeout", "relabelings", "honorLabels"}
_KNOWN_SVC_ENDPOINT = _KNOWN_POD_ENDPOINT


def sanitize(name: str) -> str:
    """A Kubernetes label name as it appears in a __meta_kubernetes_*_label_ name."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _selector_rules(selector: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        rules.append(
            {
                "action": "keep",
                "source_labels": [f"__meta_kubernetes_{kind}_label_{sanitize(key)}"],
                "regex": re.escape(str(value)),
            }
        )
    for expr in selector.get("matchExpressions") or []:
        if expr["operator"] != "Exists":
            raise NotImplementedError(f"matchExpressions operator {expr['operator']}")
        rules.append(
            {
                "action": "keep",
                "source_labels": [f"__meta_kubernetes_{kind}_labelpresent_{sanitize(expr['key'])}"],
                "regex": "true",
            }
        )
    return rules


def _relabelings(endpoint: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A monitor's relabelings (camelCase) as relabel_configs (snake_case)."""
    out = []
    for r in endpoint.get("relabelings") or []:
        rule: dict[str, Any] = {}
        for key, value in r.items():
            snake = {"sourceLabels": "source_labels", "targetLabel": "target_label"}.get(key)
            if snake is None and key not in ("regex", "replacement", "action", "separator"):
                raise NotImplementedError(f"relabeling field {key}")
            rule[snake or key] = value
        out.append(rule)
    return out


def _first_endpoint(
    monitor: Mapping[str, Any], field: str, known: Set[str]
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """The monitor's spec, its one endpoint in ``field`` (of ``known`` fields only) and its
    metadata."""
    spec = monitor["spec"]
    (endpoint,) = spec[field]
    unknown = set(endpoint) - known
    if unknown:
        raise NotImplementedError(f"{field} fields {sorted(unknown)}")
    return spec, endpoint, monitor["metadata"]


def _scrape_config(
    kind: str,
    meta: Mapping[str, Any],
    endpoint: Mapping[str, Any],
    relabel: list[dict[str, Any]],
) -> dict[str, Any]:
    """The scrape job of a ``kind`` monitor's first endpoint: ``relabel`` (the discovery's
    rules), then the endpoint label and the endpoint's own relabelings."""
    relabel = [
        *relabel,
        {"target_label": "endpoint", "replacement": endpoint["port"]},
        *_relabelings(endpoint),
    ]
    return {
        "job_name": f"{kind}/{meta['namespace']}/{meta['name']}/0",
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "metrics_path": endpoint.get("path", "/metrics"),
        "relabel_configs": relabel,
    }


def pod_monitor_scrape_config(monitor: Mapping[str, Any]) -> dict[str, Any]:
    """The scrape configuration the Prometheus Operator generates for a PodMonitor's first
    endpoint (role pod)."""
    spec, endpoint, meta = _first_endpoint(monitor, "podMetricsEndpoints", _KNOWN_POD_ENDPOINT)
    relabel: list[dict[str, Any]] = [
        # Finished pods are not scraped.
        {
            "action": "drop",
            "source_labels": ["__meta_kubernetes_pod_phase"],
            "regex": "(Failed|Succeeded)",
        },
        *_selector_rules(spec["selector"], "pod"),
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_pod_container_port_name"],
            "regex": endpoint["port"],
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"},
    ]
    if spec.get("jobLabel"):
        relabel.append(
            {
                "source_labels": [f"__meta_kubernetes_pod_label_{sanitize(spec['jobLabel'])}"],
                "target_label": "job",
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    return _scrape_config("podMonitor", meta, endpoint, relabel)


def service_monitor_scrape_config(monitor: Mapping[str, Any]) -> dict[str, Any]:
    """The scrape configuration the Prometheus Operator generates for a ServiceMonitor's
    first endpoint (role endpoints)."""
    spec, endpoint, meta = _first_endpoint(monitor, "endpoints", _KNOWN_SVC_ENDPOINT)
    relabel: list[dict[str, Any]] = [
        *_selector_rules(spec["selector"], "service"),
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpoint_port_name"],
            "regex": endpoint["port"],
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {
            "source_labels": ["__meta_kubernetes_service_name"],
            "target_label": "job",
            "replacement": "${1}",
        },
    ]
    if spec.get("jobLabel"):
        raise NotImplementedError("ServiceMonitor jobLabel")
    return _scrape_config("serviceMonitor", meta, endpoint, relabel)


def _target_group(
    address: str, meta: dict[str, str], role: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """A file_sd target group: ``meta`` and the ``role``'s (pod, service) label metadata."""
    for key, value in labels.items():
        meta[f"__meta_kubernetes_{role}_label_{sanitize(key)}"] = value
        meta[f"__meta_kubernetes_{role}_labelpresent_{sanitize(key)}"] = "true"
    return {"targets": [address], "labels": meta}


def pod_target(
    address: str,
    *,
    namespace: str,
    pod: str,
    container: str,
    labels: Mapping[str, str],
    port_name: str = "metrics",
) -> dict[str, Any]:
    """A file_sd target group with the labels Kubernetes pod discovery gives a pod's port."""
    meta = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_phase": "Running",
    }
    return _target_group(address, meta, "pod", labels)


def endpoint_target(
    address: str,
    *,
    namespace: str,
    service: str,
    service_labels: Mapping[str, str],
    pod: str,
    container: str,
    port_name: str = "metrics",
) -> dict[str, Any]:
    """A file_sd target group with the labels Kubernetes endpoints discovery gives it."""
    meta = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_service_name": service,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_container_name": container,
        "__meta_kubernetes_endpoint_port_name": port_name,
    }
    return _target_group(address, meta, "service", service_labels)
