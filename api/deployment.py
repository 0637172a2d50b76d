"""The cluster sections of a DistGNNJob: the shared volume, run policy, scheduling, images and
network isolation of its pods."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from distgnn_api.affinity import Affinity
from distgnn_api.base_model import Model
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.core_types import Toleration
from distgnn_api.kube import Annotations, Dns1123Subdomain, Image, Labels, PositiveQuantity

# --------------------------------------------------------------------------- storage


class AccessMode(StrEnum):
    read_write_once = "ReadWriteOnce"
    read_write_many = "ReadWriteMany"
    read_write_once_pod = "ReadWriteOncePod"


class RetentionPolicy(StrEnum):
    retain = "Retain"
    delete = "Delete"


class StorageSpec(Model):
    """The shared volume that holds datasets, partitions, checkpoints and results."""

    claim_name: Dns1123Subdomain | None = None
    """An existing PersistentVolumeClaim to use; unset creates one named <job>-data."""
    storage_class_name: Dns1123Subdomain | None = None
    """StorageClass of the created claim; unset uses the cluster default."""
    size: PositiveQuantity = "50Gi"
    """Size of the created claim."""
    access_modes: list[AccessMode] | None = Field(default=None, min_length=1, max_length=3)
    """Access modes of the created claim; unset means ReadWriteMany when the job has more than one pod."""
    retention_policy: RetentionPolicy = RetentionPolicy.retain
    """What happens to a created claim when the job is deleted: Retain keeps it, Delete removes it."""


# --------------------------------------------------------------------------- policies


class CleanPodPolicy(StrEnum):
    none = "None"
    running = "Running"
    all = "All"


class RunPolicy(Model):
    """Restart, deadline, cleanup and suspension, as in Kubeflow's RunPolicy."""

    backoff_limit: int = Field(default=3, ge=0, le=1000)
    """Gang restarts allowed after a trainer or sampler fails, before the job is Failed."""
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    """Fail the job when it has been active this long."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Delete the job this long after it Succeeded or Failed."""
    suspend: bool = False
    """Suspend the job: its pods are removed, and resuming continues from the last checkpoint."""
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.all
    """Pods to stop when the job finishes: All, Running, or None to keep them for debugging."""


class PullPolicy(StrEnum):
    always = "Always"
    if_not_present = "IfNotPresent"
    never = "Never"


KUEUE_KEY_PATTERN = r"^([^/]*\.)?kueue\.x-k8s\.io/"
"""Keys of Kueue's own labels and annotations (kueue.x-k8s.io/queue-name, priority-class, ...)."""
KUEUE_KEY_MESSAGE = (
    "kueue.x-k8s.io/ keys belong on the DistGNNJob's own metadata.labels (e.g. "
    "kueue.x-k8s.io/queue-name: <LocalQueue>), where the operator queues the whole job as one "
    "Workload; on scheduling.{field} they would reach the partition Job and the pods, which "
    "Kueue would then queue and start on their own, outside the job's quota: remove them"
)


def is_kueue_key(key: str) -> bool:
    """A key in Kueue's own name space (:data:`KUEUE_KEY_PATTERN`)."""
    return re.match(KUEUE_KEY_PATTERN, key) is not None


class SchedulingSpec(Model):
    """Placement of every pod of the job, and metadata for queueing systems (Kueue, Volcano)."""

    scheduler_name: Dns1123Subdomain | None = None
    """Scheduler of the pods, e.g. volcano."""
    priority_class_name: Dns1123Subdomain | None = None
    """PriorityClass of the pods."""
    node_selector: Labels = Field(default_factory=dict)
    """Node labels the pods require."""
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)
    """Tolerations of the pods."""
    affinity: Affinity | None = None
    """Pod affinity (core/v1 Affinity: nodeAffinity, podAffinity, podAntiAffinity)."""
    labels: Labels = Field(default_factory=dict)
    """Extra labels on every child and pod, e.g. team: graph. Not Kueue's kueue.x-k8s.io/ labels: they go on the DistGNNJob's own metadata.labels."""
    annotations: Annotations = Field(default_factory=dict)
    """Extra annotations on every pod. Not Kueue's kueue.x-k8s.io/ keys."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            f"!has(self.labels) || self.labels.all(k, !k.matches(r'{KUEUE_KEY_PATTERN}'))",
            KUEUE_KEY_MESSAGE.format(field="labels"),
            ".labels",
            lambda s: not any(is_kueue_key(k) for k in s.labels),
        ),
        _cel(
            f"!has(self.annotations) || self.annotations.all(k, !k.matches(r'{KUEUE_KEY_PATTERN}'))",
            KUEUE_KEY_MESSAGE.format(field="annotations"),
            ".annotations",
            lambda s: not any(is_kueue_key(k) for k in s.annotations),
        ),
    )


class ImagesSpec(Model):
    """Container images of the workload."""

    gpu: Image = "ghcr.io/distgnn/workload:0.1.0-cuda"
    """Image for pods that request GPUs."""
    cpu: Image = "ghcr.io/distgnn/workload:0.1.0-cpu"
    """Image for the partition Job and pods without GPUs."""
    pull_policy: PullPolicy = PullPolicy.if_not_present
    """imagePullPolicy of every container."""
    pull_secrets: list[Dns1123Subdomain] = Field(default_factory=list, max_length=64)
    """Names of imagePullSecrets."""


class NetworkPolicySpec(Model):
    """The job's NetworkPolicy: all ports between the job's pods, only metrics from outside."""

    enabled: bool = True
    """Create the NetworkPolicy."""
    monitoring_namespace_selector: Labels = Field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "monitoring"}
    )
    """Labels of the namespaces allowed to scrape the metrics port. Empty ({}) is an explicit choice that admits scrapers from EVERY namespace; allowAllNamespaces must then be true."""
    monitoring_pod_selector: Labels = Field(default_factory=dict)
    """Labels of the pods in those namespaces allowed to scrape; empty allows all of them."""
    allow_all_namespaces: bool = False
    """Must be true for an empty monitoringNamespaceSelector, which opens the metrics port to pods of every namespace."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "size(self.monitoringNamespaceSelector) > 0 || self.allowAllNamespaces",
            "an empty monitoringNamespaceSelector admits every namespace to the metrics port; "
            "name the monitoring namespace's labels, or set allowAllNamespaces to true",
            ".monitoringNamespaceSelector",
            lambda s: bool(s.monitoring_namespace_selector) or s.allow_all_namespaces,
        ),
    )
